"""Ray Serve: the translator deployment, its autoscaling policy, watchdog and metrics."""
