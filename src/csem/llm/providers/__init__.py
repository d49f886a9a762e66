"""csem's built-in providers (:class:`csem.llm.api.ModelAPI`), declared in the ``csem.llm_backends``
entry-point group like any plug-in: ``local`` and ``llama-cpp`` (:mod:`.llama_cpp`, in process),
``openai`` (:mod:`.openai`, any OpenAI-compatible server), ``hf`` (:mod:`.hf`, transformers)."""
