"""One set of defaults: every controller option that has a Settings counterpart takes its
default from Settings, so the controller run from the command line and a RouteService built
in code (tests, embedders) behave alike unless told otherwise."""
import dataclasses

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
