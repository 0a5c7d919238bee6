# Pieces of slurm.conf shared by scripts/slurm-local.sh (one node, this host) and scripts/slurm-cluster.sh
# (two nodes in containers), sourced: Slurm 22.05 without cgroups (containers and CI hosts), without
# accounting storage (so no sacct: the engine reads scontrol), CPUs as the consumable resource.
slurm_conf_plugins() {
  cat <<'CONF'
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
CONF
}

slurm_conf_timers() {
  cat <<'CONF'
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
CONF
}
