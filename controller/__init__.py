"""mlroute: route ML training traffic over a leaf-spine fabric.

The core (model, planners, enforcement, discovery, measurement, service) imports no SDN
framework; each framework (Ryu, os-ken) has one adapter module in ``controller/shell``.
"""
__version__ = "0.3.0"
