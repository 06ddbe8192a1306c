"""Make the Korean STT test set: what a caller says to a voice agent (bookings, deliveries, bills, accounts).

    python scripts/make_korean_corpus.py [--out out/corpus-ko] [--seed 33]
    python -m benchmarks.stt --language ko --data out/corpus-ko/test

Why: the project's own speech is English; a Korean agent needs Korean speech to measure its Whisper on,
rendered here from sentences written for this set, so a clone makes the same files with no data beside it.

  - Voice: espeak-ng's `ko` (Debian; no Korean voice we checked installs without a model hub), with a
    male or female variant, rate and pitch drawn per sentence from the seed. It is robotic: error rates
    measured on it are for this voice, well above what recorded callers would give.
  - Numbers are written as they are said (Hangul words), so the audio and the reference agree.
  - Split once by sentence (seeded): every sentence is in `dev` or in `test`, never both.
  - Output: out/corpus-ko/{dev,test}/k{NN}.wav (16 kHz mono PCM_16, 0.2 s of silence before, 0.4 s after)
    with same-name .txt transcripts, the layout benchmarks.stt reads.
"""

from __future__ import annotations

import argparse
import io
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

RATE = 16000
LEAD_S, TAIL_S = 0.2, 0.4
TEST_SHARE = 0.5

SENTENCES = (
    # bookings
    "다음 주 화요일 오후에 예약하고 싶어요.",
    "내일 오전 열 시에 자리가 있나요?",
    "두 명 예약 가능할까요?",
    "예약 시간을 금요일로 바꿔 주세요.",
    "오늘 저녁 일곱 시 예약을 취소하고 싶습니다.",
    "치과 검진 예약을 하려고 전화했어요.",
    "이번 주말에 빈 시간이 있으면 알려 주세요.",
    "제 이름으로 예약이 되어 있는지 확인해 주시겠어요?",
    "예약을 한 시간만 늦출 수 있을까요?",
    "창가 자리로 부탁드려요.",
    # deliveries
    "주문한 물건이 아직 도착하지 않았어요.",
    "택배가 언제 오는지 알고 싶어요.",
    "배송 주소를 바꾸고 싶은데요.",
    "문 앞에 놓고 가 주세요.",
    "음식이 다 식어서 왔어요.",
    "배달은 얼마나 걸리나요?",
    "송장 번호를 불러 드릴게요.",
    "상자가 찢어진 채로 왔습니다.",
    "경비실에 맡겨 주시면 됩니다.",
    "주문을 하나 더 추가할 수 있나요?",
    # bills and payments
    "이번 달 요금이 너무 많이 나왔어요.",
    "카드로 결제했는데 두 번 빠져나갔어요.",
    "환불은 언제 받을 수 있나요?",
    "자동 이체를 해지하고 싶습니다.",
    "영수증을 이메일로 보내 주세요.",
    "할부로 결제할 수 있을까요?",
    "요금제를 더 싼 걸로 바꾸고 싶어요.",
    "청구서에 모르는 금액이 있어요.",
    "오만 원을 계좌로 보냈습니다.",
    "포인트로 결제가 되나요?",
    # accounts
    "비밀번호를 잊어버렸어요.",
    "제 전화번호는 공일공 일이삼사 오육칠팔이에요.",
    "회원 정보를 수정하고 싶습니다.",
    "로그인이 계속 안 돼요.",
    "본인 확인은 어떻게 하나요?",
    "주소가 서울시 강남구로 바뀌었어요.",
    "생년월일은 구십 년 삼월 십오일입니다.",
    "인증 번호가 문자로 안 와요.",
    # the call itself
    "영업시간이 어떻게 되나요?",
    "상담원과 통화하고 싶어요.",
    "주차는 어디에 하면 되나요?",
    "지하철역에서 얼마나 걸려요?",
    "네, 그 시간 좋아요.",
    "아니요, 다른 날로 해 주세요.",
    "잠깐만요, 메모 좀 할게요.",
    "다시 한 번 말씀해 주시겠어요?",
    "감사합니다, 좋은 하루 보내세요.",
    "조금 더 천천히 말씀해 주세요.",
    "담당자에게 전화해 달라고 전해 주세요.",
    "이 번호로 문자 보내 주시면 돼요.",
    # repairs, returns, clinics
    "어제부터 이가 너무 아파요.",
    "처방전을 다시 받을 수 있을까요?",
    "진료비가 얼마인지 궁금해요.",
    "보험 적용이 되는지 알려 주세요.",
    "물건이 불량이라 교환하고 싶어요.",
    "사이즈가 안 맞아서 반품하려고요.",
    "기사님이 연락이 안 돼요.",
    "세탁기가 고장 나서 수리 기사를 부르고 싶어요.",
    "방문 시간은 오후 두 시쯤이 좋겠어요.",
    "토요일에도 문을 여나요?",
)
VARIANTS = ("", "+m1", "+m3", "+f2", "+f4")


def espeak(text: str, variant: str, rate: int, pitch: int) -> np.ndarray:
    """espeak-ng's Korean voice, as 16 kHz float32."""
    cmd = ["espeak-ng", "-v", f"ko{variant}", "-s", str(rate), "-p", str(pitch), "--stdout", text]
    wav = subprocess.run(cmd, capture_output=True, check=True).stdout
    audio, sr = sf.read(io.BytesIO(wav), dtype="float32")
    return soxr.resample(audio, sr, RATE).astype(np.float32)


def split(seed: int) -> dict[str, list[int]]:
    """Sentence indices per split, fixed by the seed."""
    order = list(range(len(SENTENCES)))
    random.Random(seed).shuffle(order)
    cut = round(len(order) * TEST_SHARE)
    return {"test": sorted(order[:cut]), "dev": sorted(order[cut:])}


def render(out: Path, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    counts = {}
    for name, indices in split(seed).items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in indices:
            text = SENTENCES[i]
            audio = espeak(text, rng.choice(VARIANTS), rate=rng.randint(135, 165), pitch=rng.randint(35, 65))
            peak = float(np.max(np.abs(audio))) or 1.0
            audio = audio / peak * 10 ** (-3 / 20)
            pcm = np.concatenate(
                [np.zeros(int(LEAD_S * RATE), np.float32), audio, np.zeros(int(TAIL_S * RATE), np.float32)]
            )
            sf.write(folder / f"k{i + 1:02d}.wav", pcm, RATE, subtype="PCM_16")
            (folder / f"k{i + 1:02d}.txt").write_text(text + "\n", encoding="utf-8")
        counts[name] = len(indices)
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="out/corpus-ko")
    p.add_argument("--seed", type=int, default=33)
    args = p.parse_args(argv)
    if shutil.which("espeak-ng") is None:
        print("error: espeak-ng is not installed (make setup-system installs it)", file=sys.stderr)
        return 2
    out = Path(args.out)
    for name in ("dev", "test"):
        shutil.rmtree(out / name, ignore_errors=True)
    counts = render(out, args.seed)
    print(f"{out}: " + ", ".join(f"{k} {v} files" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
