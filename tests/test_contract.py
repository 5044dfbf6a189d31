import pytest

from kernelgate import contract
from kernelgate.errors import KernelgateError
from kernelgate.records import Domain, Vary


def test_toml_contract(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('precision = ["tf32"]\ninplace = true\n[domain]\n"0" = [-1.0, 1.0]\n'
                 '[[vary]]\ninputs = [0, 1]\ndim = 0\nsizes = [1, 7]\n')
    c = contract.load(str(p))
    assert c.precision == ("tf32",) and c.inplace and c.strides
    assert c.domain_of(0) == Domain(-1.0, 1.0) and c.domain_of(1) is None
    assert c.vary == (Vary((0, 1), 0, (1, 7)),)
    text = "\n".join(c.assumptions())
    assert "input 0 in [-1, 1]" in text and "tf32" in text and "sizes [1, 7]" in text


def test_flags_override_file(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('precision = ["tf32"]\n')
    c = contract.load(str(p), precision="bf16", domain=contract.parse_domain_flag("1=0:2"))
    assert c.precision == ("bf16",) and c.domain_of(1) == Domain(0.0, 2.0)


@pytest.mark.parametrize("text, msg", [
    ('precision = ["fp4"]', "unknown precision"),
    ('colour = 1', "unknown contract keys"),
    ('[domain]\n"0" = [1.0, -1.0]', "must be below"),
    ('[[vary]]\ndim = 0', r"each \[\[vary\]\]"),
    ('precision = [', "not valid TOML"),
])
def test_bad_contracts_name_the_problem(tmp_path, text, msg):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(KernelgateError, match=msg):
        contract.load(str(p))


def test_missing_contract_file():
    with pytest.raises(KernelgateError, match="no such contract file"):
        contract.load("nope.toml")
