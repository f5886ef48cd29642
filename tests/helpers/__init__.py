"""What tests share and are not tests: run-dir builders (runs.py), MindFormers log lines (mflines.py), the
stand-in npu-smi (npu_smi.py), a throwaway sshd (sshd.py), the job scripts real MindSpore, msrun and MindFormers
tests start (*_job.py, mf_trainer/), and the helpers of common.py."""
