"""A stand-in for `--llm-cmd`: reads the prompt on stdin, replies with emitted_mode_switch.py's ModelNew (the code
appended to the reference source) in one ```python block, whatever it is asked."""
import re
import sys
from pathlib import Path

sys.stdin.read()
src = (Path(__file__).resolve().parent / "emitted_mode_switch.py").read_text()
code = src[src.index("class ModelNew"):]
print("A softmax with torch's fused kernel instead of a sort for the max.\n\n```python\nimport torch\n\n" + code + "```")
