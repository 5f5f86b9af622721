"""Mininet topologies of mlroute's fabrics."""
