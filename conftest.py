"""Doctests run over the packages (``--doctest-modules``): a framework adapter is collected only
where its framework is installed (Ryu on Python 3.11, os-ken on 3.12+)."""
import importlib.util

collect_ignore = []
if importlib.util.find_spec("ryu") is None:
    collect_ignore += ["controller/shell/app.py"]
if importlib.util.find_spec("os_ken") is None:
    collect_ignore += ["controller/shell/osken_app.py", "controller/shell/osken_main.py"]
