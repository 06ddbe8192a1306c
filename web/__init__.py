"""Parley browser call page: the static page (built with esbuild) and its token endpoint."""
