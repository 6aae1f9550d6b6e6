"""The Google Cloud driver."""

from vmplane.clouds.gcp import lazy_compute

# Before any module of the driver imports google.cloud.compute_v1: each process loads only the clients it uses.
lazy_compute.install()
