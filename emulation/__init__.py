"""The emulation: the mlroute controller in front of Mininet and Open vSwitch (root).

``emulation/harness/`` is the library (fabric, controller process, session, traffic agents, the
fake switch tables); the modules here are its command-line tools: ``python -m emulation.run``,
``emulation.trace``, ``emulation.collectives`` and ``emulation.demo`` (``make demo``). The
benchmarks that use it are in ``benchmarks/``."""
