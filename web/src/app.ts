// Parley call page: join a room through the token endpoint, talk to the agent, and show what happens —
// both sides' live transcripts, the agent's state and the per-turn latency the worker publishes.
// Everything a test needs to check is also mirrored on `window.parley` (read-only for tests).
import {
  type RemoteAudioTrack,
  type RemoteParticipant,
  type RemoteTrack,
  Room,
  RoomEvent,
  type TextStreamReader,
  Track,
} from 'livekit-client';

const TRANSCRIPTION_TOPIC = 'lk.transcription';
const METRICS_TOPIC = 'parley.metrics';
const AGENT_STATE_ATTRIBUTE = 'lk.agent.state';
const LEVEL_INTERVAL_MS = 10;
// Level logs keep the last 10 minutes (60 000 samples each), so a long call does not grow without bound.
const MAX_LEVEL_SAMPLES = 60_000;

interface TranscriptLine {
  segment: string;
  who: 'you' | 'agent';
  text: string;
  final: boolean;
}

interface TurnMetrics {
  turn: number;
  v2v_ms?: number; // measured by the worker at its audio output, when it does
  e2e_ms?: number; // LiveKit's agent-side e2e_latency
  stt_final_ms?: number;
  llm_ttft_ms?: number;
  tts_ttfb_ms?: number;
  [key: string]: unknown;
}

/** Audio level samples [performance.now() ms, dBFS] of the microphone and the agent, for latency checks. */
interface LevelLog {
  mic: Array<[number, number]>;
  agent: Array<[number, number]>;
}

interface PageState {
  connection: string;
  agentState: string;
  transcripts: TranscriptLine[];
  metrics: TurnMetrics[];
  levels: LevelLog;
  errors: string[];
  inboundAudio: () => Promise<{ bytesReceived: number; totalAudioEnergy: number }>;
}

const $ = <T extends HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`missing element #${id}`);
  return el as T;
};

const state: PageState = {
  connection: 'idle',
  agentState: '',
  transcripts: [],
  metrics: [],
  levels: { mic: [], agent: [] },
  errors: [],
  inboundAudio: async () => ({ bytesReceived: 0, totalAudioEnergy: 0 }),
};
(window as unknown as { parley: PageState }).parley = state;

let room: Room | undefined;
let audioContext: AudioContext | undefined;
let levelTimer: number | undefined;
const agentTracks: RemoteAudioTrack[] = [];

function showError(message: string): void {
  state.errors.push(message);
  $('error').textContent = message;
}

function setConnection(text: string): void {
  state.connection = text;
  $('connection').textContent = text;
  $<HTMLButtonElement>('join').disabled = text !== 'idle' && text !== 'disconnected';
  $<HTMLButtonElement>('leave').disabled = text !== 'connected';
  $<HTMLButtonElement>('mic').disabled = text !== 'connected';
}

function setAgentState(value: string): void {
  state.agentState = value;
  $('agent-state').textContent = value || '—';
}

function renderTranscripts(): void {
  const list = $('transcripts');
  list.replaceChildren(
    ...state.transcripts.map((line) => {
      const li = document.createElement('li');
      li.className = `${line.who}${line.final ? '' : ' interim'}`;
      const who = document.createElement('b');
      who.textContent = line.who === 'you' ? 'You' : 'Agent';
      li.append(who, document.createTextNode(` ${line.text}`));
      return li;
    }),
  );
  list.scrollTop = list.scrollHeight;
}

function renderMetrics(): void {
  const fmt = (v: unknown): string => (typeof v === 'number' ? `${Math.round(v)}` : '—');
  $('metrics').replaceChildren(
    ...state.metrics.map((m) => {
      const tr = document.createElement('tr');
      for (const v of [m.turn, m.v2v_ms ?? m.e2e_ms, m.stt_final_ms, m.llm_ttft_ms, m.tts_ttfb_ms]) {
        const td = document.createElement('td');
        td.textContent = fmt(v);
        tr.append(td);
      }
      return tr;
    }),
  );
}

/** Who a transcript stream is from: the caller, an agent participant, or someone else (not shown). */
function speakerOf(identity: string): TranscriptLine['who'] | undefined {
  if (identity === room?.localParticipant.identity) return 'you';
  return room?.remoteParticipants.get(identity)?.isAgent ? 'agent' : undefined;
}

/** One transcription stream = one update of a segment (user: full text; agent: text deltas). */
async function onTranscription(reader: TextStreamReader, from: { identity: string }): Promise<void> {
  const attrs = reader.info.attributes ?? {};
  const segment = attrs['lk.segment_id'] ?? reader.info.id;
  const who = speakerOf(from.identity);
  if (!who) return; // only the agent's transcripts are labelled "Agent"
  let line = state.transcripts.find((l) => l.segment === segment);
  if (!line) {
    line = { segment, who, text: '', final: false };
    state.transcripts.push(line);
  }
  let text = '';
  for await (const chunk of reader) {
    text += chunk;
    line.text = text;
    renderTranscripts();
  }
  line.final = (reader.info.attributes ?? {})['lk.transcription_final'] === 'true' || line.final;
  renderTranscripts();
}

function onData(payload: Uint8Array, topic?: string): void {
  if (topic !== METRICS_TOPIC) return;
  try {
    const m = JSON.parse(new TextDecoder().decode(payload)) as TurnMetrics;
    if (typeof m.turn !== 'number') return;
    state.metrics = state.metrics.filter((x) => x.turn !== m.turn).concat([m]);
    state.metrics.sort((a, b) => a.turn - b.turn);
    renderMetrics();
  } catch {
    showError('ignored a malformed latency message');
  }
}

function levelMeter(stream: MediaStream): () => number {
  audioContext ??= new AudioContext();
  const analyser = audioContext.createAnalyser();
  analyser.fftSize = 512;
  audioContext.createMediaStreamSource(stream).connect(analyser);
  const buf = new Float32Array(analyser.fftSize);
  return () => {
    analyser.getFloatTimeDomainData(buf);
    let sum = 0;
    for (const v of buf) sum += v * v;
    const rms = Math.sqrt(sum / buf.length);
    return rms > 0 ? 20 * Math.log10(rms) : -120;
  };
}

function startLevelLog(micTrack: MediaStreamTrack | undefined): void {
  const mic = micTrack ? levelMeter(new MediaStream([micTrack])) : undefined;
  const agents: Array<() => number> = [];
  const watchAgent = (t: RemoteAudioTrack) => {
    agents.push(levelMeter(new MediaStream([t.mediaStreamTrack])));
  };
  for (const t of agentTracks) watchAgent(t);
  onAgentTrack = watchAgent;
  window.clearInterval(levelTimer);
  levelTimer = window.setInterval(() => {
    const now = performance.now();
    if (mic) state.levels.mic.push([now, mic()]);
    if (agents.length) state.levels.agent.push([now, Math.max(...agents.map((f) => f()))]);
    for (const log of [state.levels.mic, state.levels.agent]) {
      // trim in batches of a second's samples, not one shift per tick
      if (log.length > MAX_LEVEL_SAMPLES + 100) log.splice(0, log.length - MAX_LEVEL_SAMPLES);
    }
  }, LEVEL_INTERVAL_MS);
}
let onAgentTrack: ((t: RemoteAudioTrack) => void) | undefined;

function onTrackSubscribed(track: RemoteTrack, _pub: unknown, participant: RemoteParticipant): void {
  if (track.kind !== Track.Kind.Audio) return;
  const audio = track as RemoteAudioTrack;
  const el = audio.attach();
  el.dataset.participant = participant.identity;
  $('audio').append(el);
  agentTracks.push(audio);
  onAgentTrack?.(audio);
}

async function inboundAudio(): Promise<{ bytesReceived: number; totalAudioEnergy: number }> {
  let bytesReceived = 0;
  let totalAudioEnergy = 0;
  for (const t of agentTracks) {
    const report = await t.receiver?.getStats();
    report?.forEach((s: { type: string; kind?: string; bytesReceived?: number; totalAudioEnergy?: number }) => {
      if (s.type === 'inbound-rtp' && s.kind === 'audio') {
        bytesReceived += s.bytesReceived ?? 0;
        totalAudioEnergy += s.totalAudioEnergy ?? 0;
      }
    });
  }
  return { bytesReceived, totalAudioEnergy };
}
state.inboundAudio = inboundAudio;

async function join(): Promise<void> {
  setConnection('connecting');
  $('error').textContent = '';
  try {
    // The server picks the room and the identity: a link can never put a caller into someone else's room.
    const res = await fetch('/token', { credentials: 'same-origin' });
    if (!res.ok) throw new Error(`token endpoint answered ${res.status}: ${await res.text()}`);
    const { url, token, room: roomName } = (await res.json()) as { url: string; token: string; room: string };
    $('room-name').textContent = roomName;

    room = new Room({
      adaptiveStream: false,
      audioCaptureDefaults: { echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
    room
      .on(RoomEvent.TrackSubscribed, onTrackSubscribed)
      .on(RoomEvent.DataReceived, (payload, _p, _k, topic) => onData(payload, topic))
      .on(RoomEvent.ParticipantAttributesChanged, (_changed, participant) => {
        const s = participant.attributes[AGENT_STATE_ATTRIBUTE];
        if (s !== undefined && participant !== room?.localParticipant) setAgentState(s);
      })
      .on(RoomEvent.Disconnected, () => {
        setConnection('disconnected');
        setAgentState('');
        window.clearInterval(levelTimer);
      });
    room.registerTextStreamHandler(TRANSCRIPTION_TOPIC, (reader, from) => {
      onTranscription(reader, from).catch((e: unknown) => showError(`transcript stream failed: ${e}`));
    });
    // No STUN/TURN: the server's own candidates are all a local call needs, and nothing leaves the host.
    await room.connect(url, token, { rtcConfig: { iceServers: [] } });
    await room.startAudio();
    setConnection('connected');
    await room.localParticipant.setMicrophoneEnabled(true);
    $('mic').textContent = 'Mute';
    const micTrack = room.localParticipant.getTrackPublication(Track.Source.Microphone)?.track;
    startLevelLog(micTrack?.mediaStreamTrack);
  } catch (e) {
    showError(`could not join: ${e instanceof Error ? e.message : String(e)}`);
    await room?.disconnect();
    setConnection('disconnected');
  }
}

async function leave(): Promise<void> {
  await room?.disconnect();
  agentTracks.length = 0;
  $('audio').replaceChildren();
}

async function toggleMic(): Promise<void> {
  if (!room) return;
  const on = !room.localParticipant.isMicrophoneEnabled;
  await room.localParticipant.setMicrophoneEnabled(on);
  $('mic').textContent = on ? 'Mute' : 'Unmute';
}

$('join').addEventListener('click', () => void join());
$('leave').addEventListener('click', () => void leave());
$('mic').addEventListener('click', () => void toggleMic());
setConnection('idle');
