"""The model: fabric, jobs, routing instances, loads, max-min rates, the fluid model."""
