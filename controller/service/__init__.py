"""The service: state, operations, views, REST, persistence, redundancy, telemetry."""
