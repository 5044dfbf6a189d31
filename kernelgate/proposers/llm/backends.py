"""Model backends behind one call: `complete(messages, *, max_tokens, timeout) -> Reply`.

- `OpenAIBackend`: chat completions through the `openai` SDK (OpenAI, vLLM, SGLang, Ollama, llama.cpp and
  hosted APIs that speak it); base URL from the argument or `OPENAI_BASE_URL`, key from `OPENAI_API_KEY`
  (a server at an explicit URL that needs no key gets a placeholder).
- `AnthropicBackend`: the Messages API through the `anthropic` SDK; key from `ANTHROPIC_API_KEY`, base URL
  from the argument or `ANTHROPIC_BASE_URL`.
- `CommandBackend`: any program; the prompt on its stdin, the reply on its stdout, a timeout, and an
  environment without keys or tokens.

Keys are read from the environment when a backend is made and handed to the SDK client only: no backend
keeps one in an attribute, prints one, or puts one in a message (`redact` scrubs error text too). The SDKs'
own retries are off; `accounting.Client` retries (429 and 5xx, with backoff) and counts.

Errors: `LLMError` (a one-line configuration problem naming its fix: missing SDK, key, unreachable endpoint,
refused key, unknown model) stops the LLM proposer; `RequestError` is one failed request (timeout, HTTP
status, a command's exit), `retryable` for 429 / 5xx / a dropped connection after the endpoint answered.
"""
from __future__ import annotations

import email.utils
import importlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlparse

from ...errors import KernelgateError, MissingExtra

#: environment names that hold credentials (keys, tokens, passwords; the SDKs' *_CUSTOM_HEADERS may carry an
#: Authorization header): kept from the command agent's environment, and their values redacted from messages
SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|_HEADERS)$|SECRET|_AUTH", re.IGNORECASE)
#: what the SDK clients get when an explicit endpoint is used with no key in the environment
PLACEHOLDER_KEY = "no-key"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0", "host.docker.internal")

Message = dict[str, str]          # {"role": "system" | "user" | "assistant", "content": str}


class LLMError(KernelgateError):
    """A configuration problem of the LLM proposer, in one line naming the fix (exit 2 from the CLI)."""


class RequestError(Exception):
    """One request that failed: `kind` timeout | http | connection | exit | empty | error."""

    def __init__(self, kind: str, message: str, *, status: int | None = None, retry_after: float | None = None,
                 retryable: bool = False):
        super().__init__(redact(message))
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.retryable = retryable


@dataclass(frozen=True)
class Reply:
    """A model's answer to one request."""

    text: str
    input_tokens: int
    output_tokens: int
    model: str
    seconds: float
    finish: str = ""                 # the backend's stop reason: stop | length | end_turn | max_tokens | ...
    estimated: bool = False          # token counts estimated from characters (the backend reported none)

    @property
    def truncated(self) -> bool:
        return self.finish in ("length", "max_tokens")


class Backend(Protocol):
    kind: str                        # openai | anthropic | cmd
    model: str

    def complete(self, messages: list[Message], *, max_tokens: int, timeout: float) -> Reply: ...

    def describe(self) -> str:
        """Where requests go, without any credential."""
        ...

    def probe(self, timeout: float = 10.0) -> list[str]:
        """Models the endpoint serves, without spending tokens; LLMError when it is unusable."""
        ...


# ------------------------------------------------------------------ helpers

def estimate_tokens(text: str) -> int:
    """A rough token count (about 4 characters a token) where the backend reports none."""
    return (len(text) + 3) // 4


def secret_values() -> list[str]:
    """Values of credential-like environment variables (to redact from any text that leaves here)."""
    return [v for k, v in os.environ.items() if SECRET_ENV.search(k) and len(v) >= 8]


def redact(text: str) -> str:
    for v in secret_values():
        if v in text:
            text = text.replace(v, "***")
    return text


def agent_env(keep: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment of a command agent: this process's, minus credentials (names in `keep` stay)."""
    return {k: v for k, v in os.environ.items() if k in keep or not SECRET_ENV.search(k)}


def is_local(url: str | None) -> bool:
    host = (urlparse(url).hostname or "") if url else ""
    return host in LOCAL_HOSTS or host.endswith(".local") or host.startswith("127.")


def retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date), else None."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        v = headers.get("retry-after")
    except Exception:  # noqa: BLE001 - headers of an unexpected type
        return None
    if v is None:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(v)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def first_line(text: object, limit: int = 300) -> str:
    s = str(text).strip().splitlines()
    line = s[0] if s else ""
    return redact(line if len(line) <= limit else line[:limit] + "...")


def _sdk(package: str) -> Any:
    try:
        return importlib.import_module(package)
    except ImportError as e:
        if isinstance(e, ModuleNotFoundError) and e.name in (package, None):
            raise MissingExtra(package, "llm") from None
        # installed but broken (a dependency of its own missing or too old)
        raise LLMError(f"the {package} SDK does not import ({first_line(e)}): "
                       "pip install -U 'kernelgate[llm]'") from None


def _status_error(e: Any, where: str, model: str, key_var: str) -> Exception:
    status = int(getattr(e, "status_code", 0) or 0)
    msg = first_line(getattr(e, "message", None) or e)
    if status in (401, 403):
        return LLMError(f"{where} refused the request (HTTP {status}: {msg}): set {key_var} to a key it accepts")
    if status == 404:
        return LLMError(f"{where} answered 404 for model '{model}' ({msg}): check the model name, and that the "
                        "endpoint URL is the API's base (for OpenAI-compatible servers it usually ends in /v1)")
    headers = getattr(getattr(e, "response", None), "headers", None)
    return RequestError("http", f"HTTP {status}: {msg}", status=status, retry_after=retry_after(headers),
                        retryable=status == 429 or status >= 500)


class _SDKBackend:
    """What the two SDK backends share: error mapping and the first-contact rule for connection errors."""

    kind = ""
    key_var = ""
    url_var = ""
    model = ""
    url = ""

    def __init__(self) -> None:
        self._answered = False       # a connection error before any answer: the endpoint is unreachable

    def describe(self) -> str:
        return f"{self.kind}:{self.model}@{self.url}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    def probe(self, timeout: float = 10.0) -> list[str]:
        """The models the endpoint lists (costs no tokens): raises LLMError when it cannot be reached or
        refuses the key, so a run can fail in one line before it starts."""
        try:
            page = self._client.models.list(timeout=timeout)
        except Exception as e:  # noqa: BLE001 - SDK errors mapped
            err = self._error(e, timeout)
            if isinstance(err, RequestError) and err.kind == "timeout":
                raise LLMError(f"{self.url} gave no answer within {timeout:g} s: is the server up "
                               f"(--llm-endpoint / {self.url_var})?") from None
            if isinstance(err, RequestError):    # an endpoint without a model list still answered
                return []
            raise err from None
        self._answered = True
        return [str(getattr(m, "id", "")) for m in getattr(page, "data", None) or []]

    def _error(self, e: Exception, timeout: float) -> Exception:
        sdk = self._mod
        if isinstance(e, sdk.APITimeoutError):
            return RequestError("timeout", f"no reply within {timeout:g} s", retryable=False)
        if isinstance(e, sdk.APIConnectionError):
            cause = first_line(e.__cause__ or e)
            if not self._answered:
                return LLMError(f"cannot reach {self.url} ({cause}): start the server, or point --llm-endpoint / "
                                f"{self.url_var} at one")
            return RequestError("connection", f"connection to {self.url} failed: {cause}", retryable=True)
        if isinstance(e, sdk.APIStatusError):
            return _status_error(e, self.url, self.model, self.key_var)
        return RequestError("error", f"{type(e).__name__}: {first_line(e)}")


# ------------------------------------------------------------------ OpenAI-compatible

class OpenAIBackend(_SDKBackend):
    """Chat completions through the `openai` SDK."""

    kind = "openai"
    key_var = "OPENAI_API_KEY"
    url_var = "OPENAI_BASE_URL"
    DEFAULT_URL = "https://api.openai.com/v1"

    def __init__(self, model: str, base_url: str | None = None):
        super().__init__()
        self._mod = _sdk("openai")
        if not model:
            raise LLMError("no model named: --llm-model NAME, or --llm openai:NAME@URL")
        self.model = model
        url = base_url or os.environ.get(self.url_var) or None
        key = os.environ.get(self.key_var)
        if not key:
            if url is None or urlparse(url).hostname == "api.openai.com":
                raise LLMError(f"{self.key_var} is not set: export it, or point --llm-endpoint / {self.url_var} "
                               "at a server that needs no key")
            key = PLACEHOLDER_KEY
        self.url = (url or self.DEFAULT_URL).rstrip("/")
        self._client = self._mod.OpenAI(api_key=key, base_url=self.url, max_retries=0)
        self._limit_arg = "max_tokens"   # newer OpenAI models want max_completion_tokens: switched on their 400

    def complete(self, messages: list[Message], *, max_tokens: int, timeout: float) -> Reply:
        t0 = time.monotonic()
        for _ in range(2):
            try:
                r = self._client.chat.completions.create(model=self.model, messages=messages, timeout=timeout,
                                                         **{self._limit_arg: max_tokens})
                break
            except Exception as e:  # noqa: BLE001 - SDK errors mapped below
                if (isinstance(e, self._mod.BadRequestError) and self._limit_arg == "max_tokens"
                        and "max_completion_tokens" in str(e)):
                    self._limit_arg = "max_completion_tokens"
                    continue
                raise self._error(e, timeout) from None
        self._answered = True
        choices = getattr(r, "choices", None) or []
        if not choices:
            raise RequestError("empty", "the reply had no choices")
        text = choices[0].message.content or ""
        usage = getattr(r, "usage", None)
        inp = getattr(usage, "prompt_tokens", None)
        out = getattr(usage, "completion_tokens", None)
        estimated = inp is None or out is None
        if estimated:
            inp, out = sum(estimate_tokens(m["content"]) for m in messages), estimate_tokens(text)
        return Reply(text, int(inp), int(out), getattr(r, "model", None) or self.model, time.monotonic() - t0,
                     str(choices[0].finish_reason or ""), estimated)


# ------------------------------------------------------------------ Anthropic

class AnthropicBackend(_SDKBackend):
    """The Messages API through the `anthropic` SDK."""

    kind = "anthropic"
    key_var = "ANTHROPIC_API_KEY"
    url_var = "ANTHROPIC_BASE_URL"
    DEFAULT_URL = "https://api.anthropic.com"

    def __init__(self, model: str, base_url: str | None = None):
        super().__init__()
        self._mod = _sdk("anthropic")
        if not model:
            raise LLMError("no model named: --llm anthropic:MODEL")
        self.model = model
        url = base_url or os.environ.get(self.url_var) or None
        key = os.environ.get(self.key_var)
        if not key:
            if not is_local(url):
                raise LLMError(f"{self.key_var} is not set: export it (keys are read from the environment only)")
            key = PLACEHOLDER_KEY
        self.url = (url or self.DEFAULT_URL).rstrip("/")
        self._client = self._mod.Anthropic(api_key=key, base_url=self.url, max_retries=0)

    def complete(self, messages: list[Message], *, max_tokens: int, timeout: float) -> Reply:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
        kwargs: dict[str, Any] = {"system": system} if system else {}
        t0 = time.monotonic()
        try:
            r = self._client.messages.create(model=self.model, max_tokens=max_tokens, messages=turns,
                                             timeout=timeout, **kwargs)
        except Exception as e:  # noqa: BLE001 - SDK errors mapped
            raise self._error(e, timeout) from None
        self._answered = True
        text = "".join(getattr(b, "text", "") for b in (getattr(r, "content", None) or [])
                       if getattr(b, "type", "") == "text")
        usage = getattr(r, "usage", None)
        inp = getattr(usage, "input_tokens", None)
        out = getattr(usage, "output_tokens", None)
        estimated = inp is None or out is None
        if estimated:
            inp, out = sum(estimate_tokens(m["content"]) for m in messages), estimate_tokens(text)
        return Reply(text, int(inp), int(out), getattr(r, "model", None) or self.model, time.monotonic() - t0,
                     str(getattr(r, "stop_reason", "") or ""), estimated)


# ------------------------------------------------------------------ a command

def transcript(messages: list[Message]) -> str:
    """A conversation as one text for a command's stdin: the system text, earlier turns marked, the request."""
    parts = [m["content"] for m in messages if m["role"] == "system"]
    turns = [m for m in messages if m["role"] != "system"]
    for m in turns[:-1]:
        head = "earlier request" if m["role"] == "user" else "your earlier reply"
        parts.append(f"----- {head} -----\n{m['content']}")
    if turns:
        parts.append(("----- request -----\n" if len(turns) > 1 else "") + turns[-1]["content"])
    return "\n\n".join(parts).rstrip() + "\n"


class CommandBackend:
    """A program as the model: the prompt on stdin, the reply on stdout (run without a shell, through shlex)."""

    kind = "cmd"

    def __init__(self, command: str, *, keep_env: tuple[str, ...] = ()):
        try:
            self.argv = shlex.split(command)
        except ValueError as e:
            raise LLMError(f"--llm-cmd does not parse ({e}): quote it as a shell would") from None
        if not self.argv:
            raise LLMError("--llm-cmd is empty: name a program that reads a prompt on stdin")
        if shutil.which(self.argv[0]) is None:
            raise LLMError(f"--llm-cmd: '{self.argv[0]}' is not an executable on PATH: give its full path")
        self.model = os.path.basename(self.argv[0])
        self.keep_env = tuple(keep_env)      # names of variables the agent may see even if they look like keys

    def describe(self) -> str:
        return "cmd:" + shlex.join(self.argv)

    def probe(self, timeout: float = 10.0) -> list[str]:
        return [self.model]              # the program was found when the backend was made

    def __repr__(self) -> str:
        return f"<CommandBackend {self.describe()}>"

    def complete(self, messages: list[Message], *, max_tokens: int, timeout: float) -> Reply:
        prompt = transcript(messages)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=agent_env(self.keep_env), start_new_session=True, text=True,
                                    encoding="utf-8", errors="replace")
        except OSError as e:
            raise LLMError(f"--llm-cmd: cannot start '{self.argv[0]}': {e.strerror or e}") from None
        try:
            out, err = proc.communicate(prompt, timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise RequestError("timeout", f"{self.model} gave no reply within {timeout:g} s (killed)") from None
        if proc.returncode != 0:
            tail = [line for line in (err or "").strip().splitlines() if line.strip()]
            raise RequestError("exit", f"{self.model} exited with status {proc.returncode}"
                               + (f": {first_line(tail[-1])}" if tail else ""))
        return Reply(out, estimate_tokens(prompt), estimate_tokens(out), self.model, time.monotonic() - t0,
                     "stop", True)
