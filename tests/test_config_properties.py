"""Property tests for configuration parsing (hypothesis): arbitrary strings in any variable
never raise anything but `ConfigError` (a `ValueError` naming the variable), and valid
settings round-trip through `to_env` / `from_env` unchanged."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spectrace import config
from spectrace.config import SETTINGS, ConfigError
from spectrace.rules.requests import REQUEST_LABELS

VARS = [var for var, _p, _d in SETTINGS.values()] + list(config.OTLP_PROTOCOL_VARS)
env_text = st.text(st.characters(blacklist_characters="\x00"), max_size=60)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(VARS), env_text, max_size=6))
def test_arbitrary_environments_raise_only_config_error(env):
    try:
        cfg = config.from_env(env)
    except ConfigError as exc:
        assert any(str(exc).startswith(v + "=") for v in env), str(exc)
        return
    assert isinstance(cfg, config.Config)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(SETTINGS)),
       value=st.one_of(env_text, st.integers(), st.floats(), st.booleans(), st.none(),
                       st.lists(env_text, max_size=3), st.binary(max_size=8)))
def test_arbitrary_keyword_values_raise_only_config_error(name, value):
    try:
        config.from_env({}, **{name: value})
    except ConfigError as exc:
        assert str(exc).startswith(f"{name} (or {SETTINGS[name][0]})=")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20).filter(lambda s: s not in SETTINGS))
def test_unknown_keywords_are_config_errors(name):
    try:
        config.from_env({}, **{name: "1"})
    except ConfigError as exc:
        assert "unknown spectrace setting" in str(exc)
    else:
        raise AssertionError("accepted an unknown setting")


_label = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9-]{0,10}[A-Za-z0-9])?", fullmatch=True)
valid = st.fixed_dictionaries({
    "enabled": st.booleans(),
    "exporters": st.lists(st.sampled_from(config.EXPORTERS), min_size=1, max_size=4,
                          unique=True),
    "output_dir": st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Co",
                                                              "Cn")), min_size=1,
                          max_size=40).filter(lambda s: s.strip() and s.isprintable()),
    "prometheus_host": st.one_of(
        st.ip_addresses().map(str),
        st.lists(_label, min_size=1, max_size=3).map(".".join).filter(
            lambda h: not all(x.isdigit() for x in h.split(".")))),
    "prometheus_port": st.integers(1, 65535),
    "strict": st.booleans(),
    "step_sample_ratio": st.floats(0, 1),
    "agreement_every": st.integers(0, 10**6),
    "finite_every": st.integers(0, 10**6),
    "metric_interval_s": st.floats(0.1, 2.0),
    "service_name": st.text(min_size=1, max_size=30).filter(
        lambda s: s.strip() and s.isprintable()),
    "token_detail": st.booleans(),
    "request_label": st.sampled_from(REQUEST_LABELS),  # unset (the default) leaves it out
    "request_label_cap": st.integers(1, 1000),
    "expected_accept_length": st.floats(1.0, 64.0),  # unset (the default) leaves it out
})


@settings(max_examples=300, deadline=None)
@given(valid)
def test_valid_settings_round_trip_through_the_environment(values):
    cfg = config.from_env({}, **values)
    env = config.to_env(cfg)
    assert set(env) == {var for var, _p, _d in SETTINGS.values()}
    again = config.from_env(env)
    assert again == cfg
    assert config.to_env(again) == env


@settings(max_examples=200, deadline=None)
@given(valid)
def test_valid_settings_given_as_variables_equal_keywords(values):
    env = config.to_env(config.from_env({}, **values))
    assert config.from_env(env) == config.from_env({}, **values)
