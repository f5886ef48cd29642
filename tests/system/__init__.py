"""System tests: real sshd, tmux, MindSpore, msrun and MindFormers jobs, the command line as a process."""
