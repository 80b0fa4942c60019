"""Serving a local GGUF model with llama.cpp for a study: `serve-local`, its chat templates, and the
facts a run records about a llama.cpp server (see docs/local-model.md)."""
