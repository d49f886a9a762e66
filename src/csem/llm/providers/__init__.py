"""csem's built-in providers ([`csem.llm.api.ModelAPI`][]), declared in the ``csem.llm_backends``
entry-point group like any plug-in: ``local`` and ``llama-cpp`` (`.llama_cpp`, in process),
``openai`` (`.openai`, any OpenAI-compatible server), ``hf`` (`.hf`, transformers)."""
