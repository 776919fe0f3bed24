// What orch-run heard from CUDA on an H100 (driver 580.159.04, CUDA 13.0), ORCH_RUN_CUPTI_DEBUG=1
// of the GPU probe (tools/tests/gpu_observe_probe.sh): the callbacks and the runtime's windows up to
// the end of the upload, then the activity records of the first profiled launch, verbatim, for
// fills, jacobi (examples/) and a one-rank allreduce (reduce_orch()). attribution_test.cpp
// replays them. The template graphs' dot prints and the teardown are left out.
#pragma once

namespace orch::tools_test {

inline constexpr const char* kFillsLog = R"log([orch-run cupti] cuptiGetGraphId found, cuptiGetGraphExecId found
[orch-run cupti] GRAPH_CREATED: graph 1 window none
[orch-run cupti] phase build of graph 0 begins
[orch-run cupti] node_begin site 0 (fill acc = 0.0  fills.orch:24:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967296 (graph 1, index 0) type kernel window 0 (fill acc = 0.0  fills.orch:24:3) -> site 0
[orch-run cupti] node_end site 0 (fill acc = 0.0  fills.orch:24:3) made node 4294967296 (graph 1, index 0)
[orch-run cupti] node_begin site 1 (fill i = 0  fills.orch:25:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967297 (graph 1, index 1) type kernel window 1 (fill i = 0  fills.orch:25:3) -> site 1
[orch-run cupti] node_end site 1 (fill i = 0  fills.orch:25:3) made node 4294967297 (graph 1, index 1)
[orch-run cupti] node_begin site 2 (orch_condition_0<<<1, 1>>>  fills.orch:26:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967298 (graph 1, index 2) type kernel window 2 (orch_condition_0<<<1, 1>>>  fills.orch:26:3) -> site 2
[orch-run cupti] node_end site 2 (orch_condition_0<<<1, 1>>>  fills.orch:26:3) made node 4294967298 (graph 1, index 2)
[orch-run cupti] node_begin site 3 (while i < rounds  fills.orch:26:3)
[orch-run cupti] GRAPH_CREATED: graph 2 window 3 (while i < rounds  fills.orch:26:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967299 (graph 1, index 3) type kernel window 3 (while i < rounds  fills.orch:26:3) -> site 3
[orch-run cupti] node_begin site 4 (fill tmp = 0.0  fills.orch:27:5)
[orch-run cupti] GRAPHNODE_CREATED: graph 2 node 8589934592 (graph 2, index 0) type kernel window 4 (fill tmp = 0.0  fills.orch:27:5) -> site 4
[orch-run cupti] node_end site 4 (fill tmp = 0.0  fills.orch:27:5) made node 8589934592 (graph 2, index 0)
[orch-run cupti] node_begin site 5 (step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5)
[orch-run cupti] GRAPHNODE_CREATED: graph 2 node 8589934593 (graph 2, index 1) type kernel window 5 (step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5) -> site 5
[orch-run cupti] node_end site 5 (step<<<ceil_div(n, 256), 256>>>  fills.orch:28:5) made node 8589934593 (graph 2, index 1)
[orch-run cupti] node_begin site 6 (orch_condition_1<<<1, 1>>>  fills.orch:26:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 2 node 8589934594 (graph 2, index 2) type kernel window 6 (orch_condition_1<<<1, 1>>>  fills.orch:26:3) -> site 6
[orch-run cupti] node_end site 6 (orch_condition_1<<<1, 1>>>  fills.orch:26:3) made node 8589934594 (graph 2, index 2)
[orch-run cupti] node_end site 3 (while i < rounds  fills.orch:26:3) made node 4294967299 (graph 1, index 3)
[orch-run cupti] phase build of graph 0 ends
[orch-run cupti] phase instantiate of graph 0 begins
[orch-run cupti] GRAPH_CREATED: graph 3 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901888 (graph 3, index 0) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901888 (graph 3, index 0) type kernel original node 4294967296 (graph 1, index 0) window none -> site 0
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901889 (graph 3, index 1) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901889 (graph 3, index 1) type kernel original node 4294967297 (graph 1, index 1) window none -> site 1
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901890 (graph 3, index 2) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901890 (graph 3, index 2) type kernel original node 4294967298 (graph 1, index 2) window none -> site 2
[orch-run cupti] GRAPH_CREATED: graph 4 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869184 (graph 4, index 0) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 4 original graph 2 node 17179869184 (graph 4, index 0) type kernel original node 8589934592 (graph 2, index 0) window none -> site 4
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869185 (graph 4, index 1) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 4 original graph 2 node 17179869185 (graph 4, index 1) type kernel original node 8589934593 (graph 2, index 1) window none -> site 5
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869186 (graph 4, index 2) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 4 original graph 2 node 17179869186 (graph 4, index 2) type kernel original node 8589934594 (graph 2, index 2) window none -> site 6
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901891 (graph 3, index 3) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901891 (graph 3, index 3) type kernel original node 4294967299 (graph 1, index 3) window none -> site 3
[orch-run cupti] GRAPH_CREATED: graph 5 window none
[orch-run cupti] GRAPH_CREATED: graph 6 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 5 node 21474836483 (graph 5, index 3) type kernel window none
[orch-run cupti] GRAPHEXEC_CREATE_STARTING: graph 1 exec 3 window none
[orch-run cupti] GRAPH_DESTROY_STARTING: graph 4 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901895 (graph 3, index 7) type kernel window none
[orch-run cupti] GRAPHNODE_DESTROY_STARTING: graph 3 node 12884901892 (graph 3, index 4) type kernel window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901896 (graph 3, index 8) type kernel window none
[orch-run cupti] GRAPHNODE_DESTROY_STARTING: graph 3 node 12884901888 (graph 3, index 0) type kernel window none -> site 0
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901897 (graph 3, index 9) type kernel window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901898 (graph 3, index 10) type kernel window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901899 (graph 3, index 11) type kernel window none
[orch-run cupti] GRAPHEXEC_CREATED: graph 1 exec 3 window none
[orch-run cupti] phase instantiate of graph 0 ends
[orch-run cupti] phase upload of graph 0 begins
[orch-run cupti] phase upload of graph 0 ends
[orch-run cupti] record: launch 1 memset 16.0 KiB graph 3 node 12884901888 (graph 3, index 0) stream 13 0.8 us -> fill acc = 0.0  fills.orch:24:3 [node id]
[orch-run cupti] record: launch 1 memset 4 B graph 3 node 12884901889 (graph 3, index 1) stream 15 0.8 us -> fill i = 0  fills.orch:25:3 [node id]
[orch-run cupti] record: launch 1 kernel orch_condition_0 graph 3 node 12884901890 (graph 3, index 2) stream 15 1.0 us -> orch_condition_0<<<1, 1>>>  fills.orch:26:3 [node id]
[orch-run cupti] record: launch 1 memcpy 16 B DtoH graph 0 node 0 stream 7 1.4 us -> outside the pipeline's graphs
[orch-run cupti] record: launch 1 kernel orch_condition_1 graph 3 node 12884901894 (graph 3, index 6) stream 17 1.2 us -> not attributed
[orch-run cupti] record: launch 1 kernel step graph 3 node 12884901893 (graph 3, index 5) stream 16 1.9 us -> not attributed
[orch-run cupti] record: launch 1 kernel memset32 graph 3 node 12884901892 (graph 3, index 4) stream 16 1.0 us -> not attributed
[orch-run cupti] record: launch 1 kernel orch_condition_1 graph 3 node 12884901894 (graph 3, index 6) stream 17 1.2 us -> not attributed
[orch-run cupti] record: launch 1 kernel step graph 3 node 12884901893 (graph 3, index 5) stream 16 1.7 us -> not attributed
[orch-run cupti] record: launch 1 kernel memset32 graph 3 node 12884901892 (graph 3, index 4) stream 16 1.0 us -> not attributed
[orch-run cupti] record: launch 1 kernel orch_condition_1 graph 3 node 12884901894 (graph 3, index 6) stream 17 1.2 us -> not attributed
[orch-run cupti] record: launch 1 kernel step graph 3 node 12884901893 (graph 3, index 5) stream 16 1.7 us -> not attributed
[orch-run cupti] record: launch 1 kernel memset32 graph 3 node 12884901892 (graph 3, index 4) stream 16 1.0 us -> not attributed
)log";

inline constexpr const char* kJacobiLog = R"log([orch-run cupti] cuptiGetGraphId found, cuptiGetGraphExecId found
[orch-run cupti] GRAPH_CREATED: graph 1 window none
[orch-run cupti] phase build of graph 0 begins
[orch-run cupti] node_begin site 0 (copy u_host -> u  jacobi.orch:21:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967296 (graph 1, index 0) type kernel window 0 (copy u_host -> u  jacobi.orch:21:3) -> site 0
[orch-run cupti] node_end site 0 (copy u_host -> u  jacobi.orch:21:3) made node 4294967296 (graph 1, index 0)
[orch-run cupti] node_begin site 1 (copy rhs_host -> rhs  jacobi.orch:22:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967297 (graph 1, index 1) type kernel window 1 (copy rhs_host -> rhs  jacobi.orch:22:3) -> site 1
[orch-run cupti] node_end site 1 (copy rhs_host -> rhs  jacobi.orch:22:3) made node 4294967297 (graph 1, index 1)
[orch-run cupti] node_begin site 2 (fill iters = 0  jacobi.orch:23:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967298 (graph 1, index 2) type kernel window 2 (fill iters = 0  jacobi.orch:23:3) -> site 2
[orch-run cupti] node_end site 2 (fill iters = 0  jacobi.orch:23:3) made node 4294967298 (graph 1, index 2)
[orch-run cupti] node_begin site 3 (fill residual = 0.0  jacobi.orch:24:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967299 (graph 1, index 3) type kernel window 3 (fill residual = 0.0  jacobi.orch:24:3) -> site 3
[orch-run cupti] node_end site 3 (fill residual = 0.0  jacobi.orch:24:3) made node 4294967299 (graph 1, index 3)
[orch-run cupti] node_begin site 4 (orch_condition_0<<<1, 1>>>  jacobi.orch:25:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967300 (graph 1, index 4) type kernel window 4 (orch_condition_0<<<1, 1>>>  jacobi.orch:25:3) -> site 4
[orch-run cupti] node_end site 4 (orch_condition_0<<<1, 1>>>  jacobi.orch:25:3) made node 4294967300 (graph 1, index 4)
[orch-run cupti] node_begin site 5 (while iters == 0 || residual > tol && iters < max_iters  jacobi.orch:25:3)
[orch-run cupti] GRAPH_CREATED: graph 2 window 5 (while iters == 0 || residual > tol && iters < max_iters  jacobi.orch:25:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967301 (graph 1, index 5) type kernel window 5 (while iters == 0 || residual > tol && iters < max_iters  jacobi.orch:25:3) -> site 5
[orch-run cupti] node_begin site 6 (fill residual = 0.0  jacobi.orch:26:5)
[orch-run cupti] GRAPHNODE_CREATED: graph 2 node 8589934592 (graph 2, index 0) type kernel window 6 (fill residual = 0.0  jacobi.orch:26:5) -> site 6
[orch-run cupti] node_end site 6 (fill residual = 0.0  jacobi.orch:26:5) made node 8589934592 (graph 2, index 0)
[orch-run cupti] node_begin site 7 (sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:27:5)
[orch-run cupti] GRAPHNODE_CREATED: graph 2 node 8589934593 (graph 2, index 1) type kernel window 7 (sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:27:5) -> site 7
[orch-run cupti] node_end site 7 (sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:27:5) made node 8589934593 (graph 2, index 1)
[orch-run cupti] node_begin site 8 (sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:28:5)
[orch-run cupti] GRAPHNODE_CREATED: graph 2 node 8589934594 (graph 2, index 2) type kernel window 8 (sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:28:5) -> site 8
[orch-run cupti] node_end site 8 (sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:28:5) made node 8589934594 (graph 2, index 2)
[orch-run cupti] node_begin site 9 (orch_condition_1<<<1, 1>>>  jacobi.orch:25:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 2 node 8589934595 (graph 2, index 3) type kernel window 9 (orch_condition_1<<<1, 1>>>  jacobi.orch:25:3) -> site 9
[orch-run cupti] node_end site 9 (orch_condition_1<<<1, 1>>>  jacobi.orch:25:3) made node 8589934595 (graph 2, index 3)
[orch-run cupti] node_end site 5 (while iters == 0 || residual > tol && iters < max_iters  jacobi.orch:25:3) made node 4294967301 (graph 1, index 5)
[orch-run cupti] node_begin site 10 (copy u -> u_host  jacobi.orch:31:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967302 (graph 1, index 6) type kernel window 10 (copy u -> u_host  jacobi.orch:31:3) -> site 10
[orch-run cupti] node_end site 10 (copy u -> u_host  jacobi.orch:31:3) made node 4294967302 (graph 1, index 6)
[orch-run cupti] phase build of graph 0 ends
[orch-run cupti] phase instantiate of graph 0 begins
[orch-run cupti] GRAPH_CREATED: graph 3 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901888 (graph 3, index 0) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901888 (graph 3, index 0) type kernel original node 4294967296 (graph 1, index 0) window none -> site 0
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901889 (graph 3, index 1) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901889 (graph 3, index 1) type kernel original node 4294967297 (graph 1, index 1) window none -> site 1
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901890 (graph 3, index 2) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901890 (graph 3, index 2) type kernel original node 4294967298 (graph 1, index 2) window none -> site 2
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901891 (graph 3, index 3) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901891 (graph 3, index 3) type kernel original node 4294967299 (graph 1, index 3) window none -> site 3
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901892 (graph 3, index 4) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901892 (graph 3, index 4) type kernel original node 4294967300 (graph 1, index 4) window none -> site 4
[orch-run cupti] GRAPH_CREATED: graph 4 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869184 (graph 4, index 0) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 4 original graph 2 node 17179869184 (graph 4, index 0) type kernel original node 8589934592 (graph 2, index 0) window none -> site 6
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869185 (graph 4, index 1) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 4 original graph 2 node 17179869185 (graph 4, index 1) type kernel original node 8589934593 (graph 2, index 1) window none -> site 7
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869186 (graph 4, index 2) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 4 original graph 2 node 17179869186 (graph 4, index 2) type kernel original node 8589934594 (graph 2, index 2) window none -> site 8
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869187 (graph 4, index 3) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 4 original graph 2 node 17179869187 (graph 4, index 3) type kernel original node 8589934595 (graph 2, index 3) window none -> site 9
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901893 (graph 3, index 5) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901893 (graph 3, index 5) type kernel original node 4294967301 (graph 1, index 5) window none -> site 5
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901894 (graph 3, index 6) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 1 node 12884901894 (graph 3, index 6) type kernel original node 4294967302 (graph 1, index 6) window none -> site 10
[orch-run cupti] GRAPH_CREATED: graph 5 window none
[orch-run cupti] GRAPH_CREATED: graph 6 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 5 node 21474836485 (graph 5, index 5) type kernel window none
[orch-run cupti] GRAPHEXEC_CREATE_STARTING: graph 1 exec 3 window none
[orch-run cupti] GRAPH_DESTROY_STARTING: graph 4 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901899 (graph 3, index 11) type kernel window none
[orch-run cupti] GRAPHNODE_DESTROY_STARTING: graph 3 node 12884901895 (graph 3, index 7) type kernel window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901900 (graph 3, index 12) type kernel window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901901 (graph 3, index 13) type kernel window none
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901902 (graph 3, index 14) type kernel window none
[orch-run cupti] GRAPHEXEC_CREATED: graph 1 exec 3 window none
[orch-run cupti] phase instantiate of graph 0 ends
[orch-run cupti] phase upload of graph 0 begins
[orch-run cupti] phase upload of graph 0 ends
[orch-run cupti] record: launch 1 memcpy 16.0 KiB HtoD graph 3 node 12884901888 (graph 3, index 0) stream 13 1.5 us -> copy u_host -> u  jacobi.orch:21:3 [node id]
[orch-run cupti] record: launch 1 memcpy 16.0 KiB HtoD graph 3 node 12884901889 (graph 3, index 1) stream 15 1.5 us -> copy rhs_host -> rhs  jacobi.orch:22:3 [node id]
[orch-run cupti] record: launch 1 memset 4 B graph 3 node 12884901890 (graph 3, index 2) stream 16 0.9 us -> fill iters = 0  jacobi.orch:23:3 [node id]
[orch-run cupti] record: launch 1 memset 4 B graph 3 node 12884901891 (graph 3, index 3) stream 17 0.9 us -> fill residual = 0.0  jacobi.orch:24:3 [node id]
[orch-run cupti] record: launch 1 kernel orch_condition_0 graph 3 node 12884901892 (graph 3, index 4) stream 16 1.0 us -> orch_condition_0<<<1, 1>>>  jacobi.orch:25:3 [node id]
[orch-run cupti] record: launch 1 memcpy 16.0 KiB DtoH graph 3 node 12884901894 (graph 3, index 6) stream 13 1.7 us -> copy u -> u_host  jacobi.orch:31:3 [node id]
[orch-run cupti] record: launch 1 memcpy 16 B DtoH graph 0 node 0 stream 7 1.4 us -> outside the pipeline's graphs
[orch-run cupti] record: launch 1 kernel orch_condition_1 graph 3 node 12884901898 (graph 3, index 10) stream 14 1.6 us -> not attributed
[orch-run cupti] record: launch 1 kernel sweep graph 3 node 12884901897 (graph 3, index 9) stream 14 1.4 us -> not attributed
[orch-run cupti] record: launch 1 kernel sweep graph 3 node 12884901896 (graph 3, index 8) stream 14 1.7 us -> not attributed
[orch-run cupti] record: launch 1 kernel memset32 graph 3 node 12884901895 (graph 3, index 7) stream 14 1.1 us -> not attributed
[orch-run cupti] record: launch 1 kernel orch_condition_1 graph 3 node 12884901898 (graph 3, index 10) stream 14 1.6 us -> not attributed
[orch-run cupti] record: launch 1 kernel sweep graph 3 node 12884901897 (graph 3, index 9) stream 14 1.4 us -> not attributed
[orch-run cupti] record: launch 1 kernel sweep graph 3 node 12884901896 (graph 3, index 8) stream 14 1.5 us -> not attributed
[orch-run cupti] record: launch 1 kernel memset32 graph 3 node 12884901895 (graph 3, index 7) stream 14 1.1 us -> not attributed
[orch-run cupti] record: launch 1 kernel orch_condition_1 graph 3 node 12884901898 (graph 3, index 10) stream 14 1.6 us -> not attributed
[orch-run cupti] record: launch 1 kernel sweep graph 3 node 12884901897 (graph 3, index 9) stream 14 1.5 us -> not attributed
[orch-run cupti] record: launch 1 kernel sweep graph 3 node 12884901896 (graph 3, index 8) stream 14 1.5 us -> not attributed
[orch-run cupti] record: launch 1 kernel memset32 graph 3 node 12884901895 (graph 3, index 7) stream 14 1.1 us -> not attributed
)log";

inline constexpr const char* kReduceLog = R"log([orch-run cupti] cuptiGetGraphId found, cuptiGetGraphExecId found
[orch-run cupti] GRAPH_CREATED: graph 1 window none
[orch-run cupti] phase build of graph 0 begins
[orch-run cupti] node_begin site 0 (twice<<<ceil_div(n, 256), 256>>>  reduce.orch:15:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967296 (graph 1, index 0) type kernel window 0 (twice<<<ceil_div(n, 256), 256>>>  reduce.orch:15:3) -> site 0
[orch-run cupti] node_end site 0 (twice<<<ceil_div(n, 256), 256>>>  reduce.orch:15:3) made node 4294967296 (graph 1, index 0)
[orch-run cupti] node_begin site 1 (allreduce sum s -> r on world  reduce.orch:16:3)
[orch-run cupti] GRAPH_CREATED: graph 2 window 1 (allreduce sum s -> r on world  reduce.orch:16:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 2 node 8589934592 (graph 2, index 0) type kernel window 1 (allreduce sum s -> r on world  reduce.orch:16:3) -> site 1
[orch-run cupti] GRAPH_CREATED: graph 3 window 1 (allreduce sum s -> r on world  reduce.orch:16:3)
[orch-run cupti] GRAPHNODE_CREATED: graph 3 node 12884901888 (graph 3, index 0) type kernel window 1 (allreduce sum s -> r on world  reduce.orch:16:3) -> site 1
[orch-run cupti] GRAPHNODE_CLONED: graph 3 original graph 2 node 12884901888 (graph 3, index 0) type kernel original node 8589934592 (graph 2, index 0) window 1 (allreduce sum s -> r on world  reduce.orch:16:3) -> site 1
[orch-run cupti] GRAPHNODE_CREATED: graph 1 node 4294967297 (graph 1, index 1) type kernel window 1 (allreduce sum s -> r on world  reduce.orch:16:3) -> site 1
[orch-run cupti] child graph 3 of site 1 (allreduce sum s -> r on world  reduce.orch:16:3)
[orch-run cupti] child graph node 12884901888 (graph 3, index 0) of site 1 (allreduce sum s -> r on world  reduce.orch:16:3)
[orch-run cupti] node_end site 1 (allreduce sum s -> r on world  reduce.orch:16:3) made node 4294967297 (graph 1, index 1)
[orch-run cupti] phase build of graph 0 ends
[orch-run cupti] phase instantiate of graph 0 begins
[orch-run cupti] GRAPH_CREATED: graph 4 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869184 (graph 4, index 0) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 4 original graph 1 node 17179869184 (graph 4, index 0) type kernel original node 4294967296 (graph 1, index 0) window none -> site 0
[orch-run cupti] GRAPH_CREATED: graph 5 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 5 node 21474836480 (graph 5, index 0) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 5 original graph 3 node 21474836480 (graph 5, index 0) type kernel original node 12884901888 (graph 3, index 0) window none -> site 1
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869185 (graph 4, index 1) type kernel window none
[orch-run cupti] GRAPHNODE_CLONED: graph 4 original graph 1 node 17179869185 (graph 4, index 1) type kernel original node 4294967297 (graph 1, index 1) window none -> site 1
[orch-run cupti] GRAPH_CREATED: graph 6 window none
[orch-run cupti] GRAPH_CREATED: graph 7 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 6 node 25769803777 (graph 6, index 1) type kernel window none
[orch-run cupti] GRAPHEXEC_CREATE_STARTING: graph 1 exec 4 window none
[orch-run cupti] GRAPHNODE_DESTROY_STARTING: graph 4 node 17179869185 (graph 4, index 1) type kernel window none -> site 1
[orch-run cupti] GRAPH_DESTROY_STARTING: graph 5 window none
[orch-run cupti] GRAPHNODE_CREATED: graph 4 node 17179869187 (graph 4, index 3) type kernel window none
[orch-run cupti] GRAPHNODE_DESTROY_STARTING: graph 4 node 17179869186 (graph 4, index 2) type kernel window none
[orch-run cupti] GRAPHEXEC_CREATED: graph 1 exec 4 window none
[orch-run cupti] phase instantiate of graph 0 ends
[orch-run cupti] phase upload of graph 0 begins
[orch-run cupti] phase upload of graph 0 ends
[orch-run cupti] record: launch 1 kernel twice graph 4 node 17179869184 (graph 4, index 0) stream 13 1.2 us -> twice<<<ceil_div(n, 256), 256>>>  reduce.orch:15:3 [node id]
[orch-run cupti] record: launch 1 memcpy 256.0 KiB DtoD graph 4 node 17179869186 (graph 4, index 2) stream 13 1.3 us -> not attributed
)log";

}  // namespace orch::tools_test
