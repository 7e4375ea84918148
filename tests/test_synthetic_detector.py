"""`rules.synthetic`: which values of each runtime's synthetic-acceptance switch mean
"the figures are fiction", and the words (the servers that prove it end to end are in
tests/test_e2e_runtime_causes.py)."""
from __future__ import annotations

import pytest

from spectrace import signals
from spectrace.rules.synthetic import sglang_simulated, vllm_synthetic


@pytest.mark.parametrize("value", [-1, -1.0, 0, 0.0, None, "", "nonsense"])
def test_sglang_off_values_raise_nothing(value):
    """SGLang simulates only when SIMULATE_ACC_LEN > 0 (its default is -1)."""
    assert sglang_simulated(value, "match-expected") is None


def test_sglang_on_names_the_variables_and_the_fix():
    f = sglang_simulated(2.5, "match-expected")
    assert f.code == signals.ACCEPTANCE_SYNTHETIC and f.severity == "error"
    assert f.message.startswith("the acceptance figures are synthetic: SGLang accepts draft "
                                "tokens by a synthetic rule (SGLANG_SIMULATE_ACC_LEN=2.5, "
                                "SGLANG_SIMULATE_ACC_METHOD=match-expected)")
    assert "Fix: unset SGLANG_SIMULATE_ACC_LEN" in f.message
    assert f.details["simulate_acc_len"] == 2.5


@pytest.mark.parametrize("method", [None, "standard", "strict", ""])
def test_vllm_other_methods_raise_nothing(method):
    assert vllm_synthetic(method, [0.5, 0.25]) is None


def test_vllm_synthetic_names_the_rates_and_the_fix():
    f = vllm_synthetic("synthetic", [0.8, 0.5, 0.2])
    assert f.severity == "error" and f.details["synthetic_acceptance_rates"] == [0.8, 0.5, 0.2]
    assert ('(rejection_sample_method "synthetic", synthetic_acceptance_rates [0.8, 0.5, 0.2])'
            in f.message)
    assert 'Fix: remove rejection_sample_method "synthetic"' in f.message
    g = vllm_synthetic("synthetic", None, 2.4)  # before vLLM turns a length into rates
    assert "synthetic_acceptance_length 2.4" in g.message
