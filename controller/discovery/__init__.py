"""Zero configuration: LLDP and ARP observations, leaf-spine recognition."""
