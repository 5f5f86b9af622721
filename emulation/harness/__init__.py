"""The emulation harness: a library that tests, tools and benchmarks share (as Faucet's
``clib/`` is to its tests). No command a user types is here (its programs run inside Mininet
hosts): the commands are beside it in ``emulation/``, the benchmarks in ``benchmarks/``.

* the fabric and the controller: ``fabricnet`` (Mininet leaf-spine of Open vSwitch switches),
  ``controller_proc`` (the controller as a subprocess, stopped by its PID), ``session`` (both,
  always torn down, also on Ctrl-C), ``ha`` (etcd and redundant controllers), ``ovs`` (switch
  state read with ``ovs-ofctl``);
* the traffic: ``agents`` (TCP ring ranks), ``roce`` (RoCE-like queue pairs), ``attacks``
  (spoofed LLDP and ARP), ``trace`` (RoCEv2 probes): programs run inside Mininet hosts, and
  ``collective_rank`` / ``mpi_rsh.sh`` / ``collectives`` (PyTorch gloo and Open MPI ranks);
* the runners: ``run`` (jobs, traffic, paths proved from counters), ``plots``;
* ``fake_switch``: OpenFlow 1.3 tables in the process (no root), the service's Installer in unit
  tests and in the host-mode benchmark; ``busy_service``: a controller on them with every kind
  of state, whose /metrics the metrics reference lists and the Grafana dashboard is checked on.

It imports the controller (``controller``) and the fabrics (``topologies``), never ``tests``.
"""
