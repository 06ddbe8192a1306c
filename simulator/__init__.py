"""The call simulator: everything that places a scripted call to a Parley agent and records what a caller
would hear.

- `livekit_stack`: a local livekit-server (+ worker, call page) on loopback or in a sealed network namespace;
- `room_caller` / `room_result` / `room_runner`: a scripted rtc caller in a real room, its recording turned
  into a `CallResult`, and the runner that starts both;
- `offline`: the same call through an AgentSession with a scripted microphone and a loudspeaker, no server;
- `audio_io`, `session_audio`: those devices; `call_script`, `call_plan`, `calls/`: call scripts and their
  renderer; `test_speech`: the speech the project's tests use, rendered by the project itself.

Tests, `make demo` and the benchmarks all import it; the latency rules themselves live in
`worker/measurement.py`, shared with the worker that sends the marks.
"""
