"""The torch CUDA generator behind `--backend cuda`: model (model.py), on-device sampling (sampling.py) and
batched generation with CUDA graphs (generator.py). Same code on CPU at tiny shapes for the tests."""
