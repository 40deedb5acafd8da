# Sourced by test scripts that may run mpirun: a private Open MPI session directory for
# this script's jobs, removed on exit (this sets the EXIT trap). Concurrent mpiruns sharing
# /tmp/ompi.HOST.UID race when one removes it while another creates its own: orte_init
# fails ("mkdir ... File exists", or "No such file or directory"; seen in CI). tether-run
# ignores the setting.
ompi_session_dir=$(mktemp -d /tmp/tether-ompi.XXXXXX)
trap 'rm -rf "$ompi_session_dir"' EXIT
export OMPI_MCA_orte_tmpdir_base=$ompi_session_dir
