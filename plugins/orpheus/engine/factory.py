"""Build an engine from one options dataclass: which token backend, which decoder, where the models live."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from plugins.orpheus.engine.core import EngineOptions, OrpheusEngine


@dataclass(frozen=True)
class EngineConfig:
    backend: str = (
        "torch"  # torch | cuda | trtllm | openai | standin (standin: benchmarks.tts --overhead only)
    )
    model_dir: str = ""  # Orpheus HF checkpoint (torch), or the FP8 checkpoint / TRT engine dir (trtllm)
    tokenizer_dir: str = ""  # defaults to model_dir
    snac_dir: str = ""  # SNAC 24 kHz: config.json + pytorch_model.bin; "standin" = zero-cost decoder
    device: str = "cpu"  # torch backend and SNAC
    dtype: str = "float32"
    cpu_threads: int = 1
    openai_base_url: str = ""  # openai backend: http://host:port/v1
    openai_model: str = "orpheus"
    openai_api_key: str = ""
    trtllm_runtime: str = (
        "pytorch"  # "pytorch" (FP8 HF checkpoint) or "engine" (prebuilt TensorRT engine dir)
    )
    trtllm_kv_fp8: bool = True
    trtllm_max_batch: int = 128
    trtllm_free_gpu_memory_fraction: float = 0.85
    cuda_max_seq: int = 2048  # cuda backend: prompt + audio ids per utterance (KV cache length)
    cuda_graphs: bool = True
    cuda_fp8: bool = False  # cuda backend: FP8 weights (torch._scaled_mm), Hopper
    standin_speed: float = 1.0  # standin backend: its generation rate as a multiple of real time
    engine: EngineOptions = field(default_factory=EngineOptions)

    @classmethod
    def for_test_model(cls, root: str | Path, **kw: object) -> EngineConfig:
        """The layout written by `make-test-model DIR`."""
        r = Path(root)
        return cls(model_dir=str(r / "orpheus"), snac_dir=str(r / "snac"), **kw)  # type: ignore[arg-type]


def build_engine(config: EngineConfig) -> OrpheusEngine:
    """Construct (not start) the engine; `await engine.start()` loads and warms the models."""
    from plugins.orpheus.engine.backends.base import TokenBackend

    backend: TokenBackend
    if config.backend == "torch":
        from plugins.orpheus.engine.backends.torch_backend import TorchBackend, TorchBackendOptions

        backend = TorchBackend(
            TorchBackendOptions(config.model_dir, config.device, config.dtype, config.cpu_threads)
        )
    elif config.backend == "cuda":
        from plugins.orpheus.engine.backends.cuda_backend import CudaBackend, CudaBackendOptions

        backend = CudaBackend(
            CudaBackendOptions(
                model_dir=config.model_dir,
                device=config.device,
                dtype=config.dtype,
                rows=config.engine.max_streams,  # one generating utterance per stream at a time
                max_seq=config.cuda_max_seq,
                cuda_graphs=config.cuda_graphs,
                fp8=config.cuda_fp8,
                threads=config.cpu_threads,
            )
        )
    elif config.backend == "trtllm":
        from plugins.orpheus.engine.backends.trtllm_backend import TrtLlmBackend, TrtLlmOptions

        backend = TrtLlmBackend(
            TrtLlmOptions(
                model_dir=config.model_dir,
                tokenizer_dir=config.tokenizer_dir or config.model_dir,
                runtime=config.trtllm_runtime,
                kv_cache_fp8=config.trtllm_kv_fp8,
                max_batch_size=config.trtllm_max_batch,
                free_gpu_memory_fraction=config.trtllm_free_gpu_memory_fraction,
            )
        )
    elif config.backend == "openai":
        from plugins.orpheus.engine.backends.openai_backend import OpenAIBackend, OpenAIBackendOptions

        backend = OpenAIBackend(
            OpenAIBackendOptions(
                base_url=config.openai_base_url,
                model=config.openai_model,
                api_key=config.openai_api_key,
                tokenizer_dir=config.tokenizer_dir or config.model_dir,
            )
        )
    elif config.backend == "standin":
        from plugins.orpheus.engine import ids
        from plugins.orpheus.engine.standins import StandInTokenBackend

        backend = StandInTokenBackend(
            config.standin_speed * ids.TOKENS_PER_SECOND, slots=2 * config.engine.max_streams + 2
        )
    else:
        raise ValueError(f"unknown backend {config.backend!r}; one of torch, cuda, trtllm, openai, standin")

    if config.snac_dir == "standin":
        from plugins.orpheus.engine.standins import StandInDecoder

        decoder: object = StandInDecoder()
    else:
        from plugins.orpheus.engine.snac_decoder import DecoderOptions, SnacDecoder

        decoder = SnacDecoder.load(
            DecoderOptions(
                snac_dir=config.snac_dir,
                device=config.device,
                threads=config.cpu_threads,
                max_batch=config.engine.batcher.max_batch,
            )
        )
    return OrpheusEngine(backend, decoder, config.engine)  # type: ignore[arg-type]
