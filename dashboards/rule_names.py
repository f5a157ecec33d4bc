"""Names of the recorded series: the rules (dashboards/rules.py) and the dashboards use these.

Names follow Prometheus' `level:metric:operations`. They carry no window (`:rate`, not
`:rate`): the window is `MixinConfig.rate_window`, so a deployment that changes it keeps
its names, queries and dashboards.
"""

from __future__ import annotations

# ---- per OSD, from the exporter's series ------------------------------------------------------
OSD_OP_RATE = "ceph_daemon_op:ceph_osd_op:rate"
OSD_OP_LATENCY_AVG = "ceph_daemon:ceph_osd_op_latency_seconds:avg"
OSD_OP_LATENCY_P50 = "ceph_daemon:cephscope_osd_op_latency_seconds:p50"
OSD_OP_LATENCY_P99 = "ceph_daemon:cephscope_osd_op_latency_seconds:p99"
# time an op waited before a tp_osd_tp worker dequeued it, per op type (op="r|w|rw")
OSD_OP_QUEUE_WAIT = "ceph_daemon:cephscope_osd_op_queue_wait_seconds:avg_rate"

# ---- per OSD device and network, node_exporter joined through the topology info series ---------
DEVICE_READS = "ceph_daemon_device:node_disk_reads_completed:rate"
DEVICE_WRITES = "ceph_daemon_device:node_disk_writes_completed:rate"
DEVICE_READ_BYTES = "ceph_daemon_device:node_disk_read_bytes:rate"
DEVICE_WRITTEN_BYTES = "ceph_daemon_device:node_disk_written_bytes:rate"
DEVICE_READ_AWAIT = "ceph_daemon_device:node_disk_read_await_seconds:rate"
DEVICE_WRITE_AWAIT = "ceph_daemon_device:node_disk_write_await_seconds:rate"
DEVICE_AWAIT = "ceph_daemon_device:node_disk_await_seconds:rate"
DEVICE_UTIL = "ceph_daemon_device:node_disk_io_util:rate"
DEVICE_QUEUE_SIZE = "ceph_daemon_device:node_disk_queue_size:rate"
NETWORK_RECEIVE_BYTES = "ceph_daemon_network:node_network_receive_bytes:rate"
NETWORK_TRANSMIT_BYTES = "ceph_daemon_network:node_network_transmit_bytes:rate"
NETWORK_LINK_UTIL = "ceph_daemon_network:node_network_link_util:rate"

# ---- per sweep step (the running step's labels stamped on a cluster-wide figure) --------------
STEP_OSD_OPS = "cephscope_step:osd_ops:rate"
STEP_OSD_OP_LATENCY_AVG = "cephscope_step:osd_op_latency_seconds:avg"
STEP_OSD_OP_LATENCY_P99 = "cephscope_step:osd_op_latency_seconds:p99"
STEP_OSD_CPU_CORES = "cephscope_step:osd_cpu_cores:rate"
STEP_OSD_TP_OSD_TP_CPU_CORES = "cephscope_step:osd_tp_osd_tp_cpu_cores:rate"
STEP_OSD_OP_QUEUE_ITEMS = "cephscope_step:osd_op_queue_items:sum"
STEP_OSD_OP_SHARDS = "cephscope_step:osd_op_shards:sum"
STEP_NODE_CPU_BUSY = "cephscope_step:node_cpu_busy:ratio"
STEP_CLIENT_OPS = "cephscope_step:client_ops_per_second"
STEP_CLIENT_LATENCY = "cephscope_step:client_latency_seconds"
# CephFS and RGW, all MDSs / all gateways together; the RGW ones per op="get|put"
STEP_MDS_REQUESTS = "cephscope_step:mds_requests:rate"
STEP_MDS_REPLY_LATENCY_AVG = "cephscope_step:mds_reply_latency_seconds:avg"
STEP_RGW_OPS = "cephscope_step:rgw_ops:rate"
STEP_RGW_LATENCY_AVG = "cephscope_step:rgw_latency_seconds:avg"
