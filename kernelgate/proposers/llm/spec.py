"""Which model to ask, from a spec string or separate endpoint / model / command arguments.

    openai:MODEL@URL        an OpenAI-compatible server (vLLM, SGLang, Ollama, a hosted API)
    openai:MODEL            URL from OPENAI_BASE_URL, else api.openai.com
    MODEL@URL, MODEL        the same (openai is the default kind)
    anthropic:MODEL[@URL]   the Anthropic Messages API (URL from ANTHROPIC_BASE_URL, else the API's)
    cmd:COMMAND ARGS        a program: the prompt on its stdin, the reply on its stdout

`parse_spec(llm, endpoint=, model=, cmd=)` maps the CLI's `--llm`, `--llm-endpoint`, `--llm-model` and
`--llm-cmd` onto one `Spec`; `make_backend(spec)` builds its backend (reading keys from the environment,
failing in one line when an SDK, a key or a model is missing). A spec never holds a key.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .backends import AnthropicBackend, Backend, CommandBackend, LLMError, OpenAIBackend

KINDS = ("openai", "anthropic", "cmd")
_URL_AT = re.compile(r"@(?=https?://)")


@dataclass(frozen=True)
class Spec:
    kind: str                       # openai | anthropic | cmd
    model: str = ""
    url: str | None = None
    command: str = ""

    def __str__(self) -> str:
        if self.kind == "cmd":
            return f"cmd:{self.command}"
        return f"{self.kind}:{self.model}" + (f"@{self.url}" if self.url else "")


def parse_spec(llm: str | None = None, *, endpoint: str | None = None, model: str | None = None,
               cmd: str | None = None) -> Spec | None:
    """One Spec from the CLI's arguments, or None when none names a model (no LLM configured)."""
    llm = (llm or "").strip() or None
    if cmd:
        if llm or endpoint or model:
            raise LLMError("--llm-cmd names the agent by itself: drop --llm / --llm-endpoint / --llm-model")
        return Spec("cmd", command=cmd.strip())
    if llm is None:
        if not model:
            if endpoint:
                raise LLMError("--llm-endpoint needs a model: add --llm-model NAME")
            return None
        return Spec("openai", model.strip(), endpoint)
    kind, sep, rest = llm.partition(":")
    if not sep or kind not in KINDS:          # no kind prefix (a model name, or MODEL@http://...): openai
        kind, rest = "openai", llm
    if kind == "cmd":
        if endpoint or model:
            raise LLMError("--llm cmd:... names the agent by itself: drop --llm-endpoint / --llm-model")
        if not rest.strip():
            raise LLMError("--llm cmd: needs a command, e.g. --llm 'cmd:my-agent --print'")
        return Spec("cmd", command=rest.strip())
    name, url = (_URL_AT.split(rest, maxsplit=1) + [None])[:2]
    name = name.strip()
    if model and name and model.strip() != name:
        raise LLMError(f"--llm names model '{name}' and --llm-model '{model}': give one")
    if endpoint and url and endpoint.rstrip("/") != url.rstrip("/"):
        raise LLMError(f"--llm names endpoint {url} and --llm-endpoint {endpoint}: give one")
    name = name or (model or "").strip()
    if not name:
        raise LLMError(f"--llm {llm}: no model named (e.g. {kind}:MODEL)")
    return Spec(kind, name, url or endpoint)


def make_backend(spec: Spec, *, keep_env: tuple[str, ...] = ()) -> Backend:
    """The backend a spec names (keys from the environment; one-line LLMError / MissingExtra on a problem)."""
    if spec.kind == "openai":
        return OpenAIBackend(spec.model, spec.url)
    if spec.kind == "anthropic":
        return AnthropicBackend(spec.model, spec.url)
    if spec.kind == "cmd":
        return CommandBackend(spec.command, keep_env=keep_env)
    raise LLMError(f"unknown LLM kind '{spec.kind}': one of {', '.join(KINDS)}")
