"""Hooks that declare jobs to the controller from where jobs start: a PyTorch training script
(``pytorch``) and Slurm's controller-side prolog and epilog (``slurm``). Standard library and
``controller.client`` only: they run under the system Python and on Slurm controller hosts."""
