# Kept for editable installs with the setuptools that Ryu 4.34 needs; metadata is in setup.cfg.
from setuptools import setup

setup()
