"""Code out of model replies: fences of every kind, several blocks, prose, cut-off replies, no code."""
from __future__ import annotations

import ast

from kernelgate.proposers.llm import extract_code, language_of
from llm_fakes import BUILD_ERROR, CORRECT, PROSE, SECOND, WRONG

MAIN = "class ModelNew(Model):\n    def forward(self, x):\n        return helper(x)\n"
HELPER = "def helper(x):\n    return x + 1\n"


def test_fenced_python_with_prose_around():
    p = extract_code(CORRECT)
    assert p.ok and p.code.startswith("import torch") and "class ModelNew(Model)" in p.code
    assert "fused version" not in p.code and p.blocks == 1 and p.language == "torch"


def test_fence_tags_py_none_and_tilde():
    assert extract_code(WRONG).ok                                  # ```py
    assert extract_code(SECOND).ok                                 # ``` with no language
    p = extract_code("Here it is\n~~~python\n" + MAIN + HELPER + "~~~\nthanks")
    assert p.ok and "def helper" in p.code


def test_several_blocks_join_the_helper_the_main_block_uses():
    text = ("First a helper:\n```python\n" + HELPER + "```\nAn unrelated sketch:\n```python\n"
            "def unused():\n    pass\n```\nThen the model:\n```python\n" + MAIN + "```\n")
    p = extract_code(text)
    assert p.ok and p.joined == 1 and p.blocks == 3
    assert p.code.index("def helper") < p.code.index("class ModelNew") and "unused" not in p.code
    ast.parse(p.code)


def test_the_last_block_defining_modelnew_wins_and_other_languages_are_skipped():
    first = "class ModelNew(Model):\n    pass  # first try\n"
    second = "class ModelNew(Model):\n    pass  # revised\n"
    text = f"```python\n{first}```\n```cpp\nint main() {{}}\n```\n```python\n{second}```"
    p = extract_code(text)
    assert p.ok and "revised" in p.code and "first try" not in p.code and "int main" not in p.code


def test_prose_only_and_empty_replies_give_a_reason():
    p = extract_code(PROSE)
    assert not p.ok and "prose only" in p.reason
    assert extract_code("   \n").reason == "empty reply"


def test_blocks_without_modelnew_and_non_python_blocks_give_a_reason():
    p = extract_code("```python\n" + HELPER + "```")
    assert not p.ok and "none defines class ModelNew" in p.reason
    p = extract_code("```cuda\n__global__ void k() {}\n```")
    assert not p.ok and "no Python code block" in p.reason and "cuda" in p.reason


def test_syntax_error_is_the_reason_and_a_cut_off_reply_says_so():
    p = extract_code("```python\nclass ModelNew(Model):\n    def forward(self, x)\n        return x\n```")
    assert not p.ok and "does not parse" in p.reason and "line 2" in p.reason
    p = extract_code("Sure.\n```python\nclass ModelNew(Model):\n    def forward(self, x):\n        return (x +")
    assert not p.ok and "cut off" in p.reason


def test_an_unclosed_fence_that_still_parses_is_used():
    p = extract_code("Sure.\n```python\n" + MAIN + HELPER)
    assert p.ok and "def helper" in p.code


def test_bare_code_with_prose_before_and_after():
    text = "Here is my answer.\n\nimport torch\n\n" + HELPER + "\n" + MAIN + "\nThis should be faster because..."
    p = extract_code(text)
    assert p.ok and p.code.startswith("import torch") and "faster because" not in p.code


def test_language_detection():
    assert extract_code(BUILD_ERROR).language == "cpp"
    assert language_of("import triton\nimport triton.language as tl\n") == "triton"
    assert language_of("load_inline(name='k', cpp_sources=s, cuda_sources=c)") == "cuda"
    assert language_of("x = torch.relu(y)") == "torch"
