"""The phone side of the SIP tests: sipp places a call that streams a G.711 WAV, and the RTP coming back
is read from the namespace capture (sipp does not record) and checked for sound."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.e2e.harness import E2EStack
from worker.measurement import VOICED_DBFS

SCENARIO = Path(__file__).resolve().parent / "sipp" / "uac_call.xml"


def ulaw_decode(data: bytes) -> np.ndarray:
    """G.711 μ-law bytes → int16 samples."""
    u = ~np.frombuffer(data, dtype=np.uint8)
    sign = u & 0x80
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    magnitude = ((mantissa.astype(np.int32) << 3) + 0x84) << exponent
    samples = magnitude - 0x84
    return np.where(sign != 0, -samples, samples).astype(np.int16)


def packet_dbfs(samples: np.ndarray) -> float:
    rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if samples.size else 0.0
    return 20 * np.log10(rms / 32768) if rms > 0 else -120.0


@dataclass(frozen=True)
class RtpStream:
    times: list[float]  # capture time (s, epoch) of each PCMU packet
    levels: list[float]  # its level in dBFS

    @property
    def packets(self) -> int:
        return len(self.times)

    @property
    def voiced_packets(self) -> int:
        return sum(1 for lvl in self.levels if lvl > VOICED_DBFS)

    def voiced_times(self) -> list[float]:
        return [t for t, lvl in zip(self.times, self.levels, strict=True) if lvl > VOICED_DBFS]


def rtp_stream(capture: Path, phone_ip: str, phone_port: int, to_phone: bool) -> RtpStream:
    """The PCMU packets the phone (phone_ip:phone_port, its media socket) received or sent, with levels."""
    if to_phone:
        match = f"ip.dst=={phone_ip} && udp.dstport=={phone_port}"
    else:
        match = f"ip.src=={phone_ip} && udp.srcport=={phone_port}"
    res = subprocess.run(
        [
            "tshark",
            "-n",
            "-r",
            str(capture),
            "-d",
            f"udp.port=={phone_port},rtp",
            "-Y",
            f"rtp && {match}",
            "-T",
            "fields",
            "-E",
            "separator=/t",
            "-e",
            "frame.time_epoch",
            "-e",
            "rtp.p_type",
            "-e",
            "rtp.payload",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    times: list[float] = []
    levels: list[float] = []
    for line in res.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[1] != "0" or not parts[2]:
            continue
        times.append(float(parts[0]))
        levels.append(packet_dbfs(ulaw_decode(bytes.fromhex(parts[2].replace(":", "")))))
    return RtpStream(times, levels)


def voice_to_voice_ms(caller: RtpStream, agent: RtpStream, min_gap_s: float = 0.6) -> list[float]:
    """Per caller turn: its last voiced packet → the agent's first voiced packet after it."""
    out = []
    voiced = caller.voiced_times()
    ends = [t for t, nxt in zip(voiced, [*voiced[1:], float("inf")], strict=True) if nxt - t >= min_gap_s]
    agent_voiced = agent.voiced_times()
    for end in ends:
        reply = next((t for t in agent_voiced if t > end), None)
        if reply is not None:
            out.append((reply - end) * 1000)
    return out


def write_scenario(out: Path, wav: Path, hold_ms: int) -> Path:
    text = SCENARIO.read_text().replace("RTP_WAV", str(wav)).replace("HOLD_MS", str(hold_ms))
    path = out / "uac_call.xml"
    path.write_text(text)
    return path


@dataclass(frozen=True)
class SippCall:
    returncode: int
    output: str
    local_ip: str
    media_port: int


def place_call(
    stack: E2EStack,
    target: str,
    number: str,
    wav: Path,
    hold_ms: int,
    local_ip: str,
    media_port: int = 16000,
    sip_port: int = 5070,
) -> SippCall:
    """One call with sipp from local_ip to target (host:port), run in the phone's own namespace (another
    network, routed to the stack's); returns when sipp has hung up."""
    scenario = write_scenario(stack.opts.out_dir, wav, hold_ms)
    cmd = [
        "sipp",
        target,
        "-sf",
        str(scenario),
        "-s",
        number,
        "-i",
        local_ip,
        "-p",
        str(sip_port),
        "-mi",
        local_ip,
        "-mp",
        str(media_port),
        "-m",
        "1",
        "-l",
        "1",
        "-timeout",
        f"{hold_ms // 1000 + 60}s",
        "-nostdin",
        "-trace_err",
        "-error_file",
        str(stack.opts.out_dir / "sipp_errors.log"),
    ]
    res = stack.run_in_ns(cmd, timeout=hold_ms / 1000 + 90, phone=True)
    return SippCall(res.returncode, (res.stdout + res.stderr)[-3000:], local_ip, media_port)
