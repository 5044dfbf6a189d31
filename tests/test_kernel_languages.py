"""Kernel languages read from a source's text (kernelgate/languages.py)."""
from kernelgate.languages import kernel_languages


def test_languages_in_code_and_kernel_strings_count_and_comments_and_prose_do_not():
    """Red team 29: a comment naming Triton switched a CUDA reference's oracle to its own precision."""
    assert kernel_languages("import torch\n# TODO: import triton, @triton.jit\n") == ()
    assert kernel_languages('"""Could be a @triton.jit kernel or a pallas_call."""\nimport torch\n') == ()
    assert kernel_languages("import triton\n\n@triton.jit\ndef k(x):\n    pass\n") == ("triton",)
    cuda = ('from torch.utils.cpp_extension import load_inline\nsrc = """__global__ void k() {}"""\n'
            'm = load_inline(name="m", cpp_sources="", cuda_sources=src)  # a CUDA kernel\n')
    assert kernel_languages(cuda) == ("cuda",)
    assert kernel_languages('from torch.utils.cpp_extension import load_inline\n'
                            'm = load_inline(name="m", cpp_sources="int f() { return 1; }")\n') == ("cpp",)
    assert kernel_languages("def broken(:\n    import triton\n") == ("triton",)      # not Python: the text
