"""Fast tests: no subprocess, no sshd, no tmux, no MindSpore training (pytest tests/unit, under a minute)."""
