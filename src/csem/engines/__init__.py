"""Running csem on engines users already operate, beyond one process.

* [`csem.engines.ray`][]: scoring with a student and judging through an OpenAI-compatible
  endpoint as ``ray.data.Dataset.map_batches`` stages (``csem score --engine ray``). Needs the
  optional ``ray`` extra (``pip install 'csem[ray]'``); nothing in csem's core imports it.

Judging at scale on vLLM and multi-node training through Lightning need no engine module: vLLM's
OpenAI-compatible server is an ``openai:`` judge (``--judge-opt base_url=...``) and ``csem train``
passes ``--num-nodes/--devices/--strategy`` to Lightning's ``Trainer`` (docs/guides/scale.md).
"""
