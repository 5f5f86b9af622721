"""One set of defaults: every controller option that has a Settings counterpart takes its
default from Settings, so the controller run from the command line and a RouteService built
in code (tests, embedders) behave alike unless told otherwise."""
import dataclasses
import re

from controller.service.settings import Settings
from controller.shell import flags

ALIASES = {"sflow_sampling_points": "sampling_points"}  # option name -> Settings field


def _counterparts() -> dict[str, tuple[object, object]]:
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    out = {}
    for opt in flags.OPTS:
        name = opt.name.removeprefix("mlroute-").replace("-", "_")
        name = ALIASES.get(name, name)
        if name in fields and fields[name].default is not dataclasses.MISSING:
            out[opt.name] = (opt.default, fields[name].default)
    return out


def test_every_option_with_a_settings_counterpart_has_its_default():
    pairs = _counterparts()
    # the mapping cannot go empty unnoticed: these are known to have counterparts
    assert {"mlroute-algorithm", "mlroute-mode", "mlroute-objective", "mlroute-dead-after",
            "mlroute-hold-down", "mlroute-link-gbps", "mlroute-max-flow-rules",
            "mlroute-over-budget", "mlroute-learn-window", "mlroute-learn-min-gain",
            "mlroute-learn-replans-per-minute", "mlroute-sflow-sampling-points"} <= set(pairs)
    differ = {name: pair for name, pair in pairs.items() if pair[0] != pair[1]}
    assert differ == {}, "option default != Settings default: " + repr(differ)


def test_the_defaults_users_run_with():
    s = Settings()
    assert (s.dead_after, s.hold_down) == (3.0, 5.0)


def _shown(value) -> str:
    """A default as ``mlroute-controller --help`` shows it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value in (None, "") else str(value)


def test_the_help_shows_each_option_with_its_settings_default():
    """``mlroute-controller --help`` (``shell/usage.py``): every mlroute option within the first
    72 lines, with the default it runs with, which is Settings' where Settings has one."""
    from oslo_config import cfg

    from controller.shell import usage
    conf = cfg.ConfigOpts()
    conf.register_cli_opts(flags.OPTS + flags.REST_OPTS)
    lines = usage.render(conf, "a framework").splitlines()
    assert lines[0].startswith("usage: mlroute-controller")
    shown = {}
    for line in lines[:72]:
        m = re.match(r"  --(\S+)(?: [A-Z_]+)? +(\S+) ", line)
        if m:
            shown[m[1]] = m[2]
    settings = {name: pair[1] for name, pair in _counterparts().items()}
    assert len(settings) >= 12
    for opt in flags.OPTS + flags.REST_OPTS:
        assert opt.name in shown, f"--{opt.name} is not in the help's first 72 lines"
        expected = settings[opt.name] if opt.name in settings else opt.default
        assert shown[opt.name] == _shown(expected), opt.name
    assert shown["wsapi-host"] == "127.0.0.1" == flags.REST_HOST  # where REST really listens
    assert (shown["mlroute-algorithm"], shown["mlroute-dead-after"]) == \
        (Settings.algorithm, str(Settings.dead_after))
