"""vLLM's batch file line models, written from vLLM's source for the tests (vLLM itself cannot be
installed here: its wheel is built for CUDA and imports torch with CUDA kernels, the engine, FastAPI
and aiohttp at import time; ``pip download --no-deps vllm`` gives vllm-0.34.0, 239 MB).

Source (vLLM 0.34.0 wheel, Apache-2.0):

* ``vllm/entrypoints/launchers/run_batch.py`` (``vllm run-batch``; ``vllm/entrypoints/openai/run_batch.py``
  is its deprecated alias): ``class BatchRequestInput(OpenAIBaseModel)`` with ``custom_id: str``,
  ``method: str``, ``url: str``, ``body``; a ``field_validator("body", mode="plain")`` that parses
  the body as ``ChatCompletionRequest`` when ``url == "/v1/chat/completions"``;
  ``class BatchRequestOutput(OpenAIBaseModel)`` with ``id: str``, ``custom_id: str``,
  ``response: BatchResponseData | None`` (``status_code: int = 200``, ``request_id: str``,
  ``body``), ``error: Any | None``.
* ``vllm/entrypoints/serve/engine/protocol.py``: ``class OpenAIBaseModel(BaseModel)`` with
  ``model_config = ConfigDict(extra="allow")`` (extra fields are accepted and logged).
* ``vllm/entrypoints/openai/chat_completion/protocol.py``: ``class ChatCompletionRequest`` (the
  fields csem sends, with vLLM's types: ``messages: list[...]``, ``model: str | None``, ``logprobs:
  bool | None = False``, ``top_logprobs: int = 0``, ``max_tokens: int | None``, ``n: int | None =
  1``, ``seed: int | None``, ``stop: str | list[str] | None``, ``temperature: float | None``,
  ``top_p: float | None``, ``top_k: int | None``, ``response_format``) and its ``check_logprobs``
  validator (``mode="before"``): ``top_logprobs`` an integer, >= 0 or -1, and ``logprobs`` true
  whenever ``top_logprobs`` is -1 or > 0.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator


class OpenAIBaseModel(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChatMessage(OpenAIBaseModel):
    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str


class ResponseFormat(OpenAIBaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict | None = None


class ChatCompletionRequest(OpenAIBaseModel):
    messages: list[ChatMessage]
    model: str | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = 0
    max_tokens: int | None = None
    n: int | None = 1
    seed: int | None = None
    stop: str | list[str] | None = []
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    response_format: ResponseFormat | None = None

    @model_validator(mode="before")
    @classmethod
    def check_logprobs(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        top = data.get("top_logprobs")
        if top is not None:
            if not isinstance(top, (int, float)):
                raise ValueError("`top_logprobs` must be an integer.")
            if top < 0 and top != -1:
                raise ValueError("`top_logprobs` must be a positive value or -1.")
            if (top == -1 or top > 0) and not data.get("logprobs"):
                raise ValueError("when using `top_logprobs`, `logprobs` must be set to true.")
        return data


class BatchRequestInput(OpenAIBaseModel):
    custom_id: str
    method: str
    url: str
    body: Any

    @field_validator("body", mode="plain")
    @classmethod
    def check_type_for_url(cls, value: Any, info: ValidationInfo):
        if info.data["url"] == "/v1/chat/completions":
            return ChatCompletionRequest.model_validate(value)
        raise ValueError(f"csem writes chat completions only, not {info.data['url']}")


class BatchResponseData(OpenAIBaseModel):
    status_code: int = 200
    request_id: str
    body: dict | None = None


class BatchRequestOutput(OpenAIBaseModel):
    id: str
    custom_id: str
    response: BatchResponseData | None
    error: Any | None
