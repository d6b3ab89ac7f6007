"""The labels and annotations trainlaunch puts on its objects, and those Kubernetes sets."""

from __future__ import annotations

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_APP = "trainlaunch.io/app"
LABEL_ROLE = "trainlaunch.io/role"
LABEL_SESSION = "trainlaunch.io/session"
ANN_APP_NAME = "trainlaunch.io/app-name"
ANN_ROLE_INDEX = "trainlaunch.io/role-index"
ANN_ROLE = "trainlaunch.io/role"  # the Role as submitted (JSON), so describe can return it
ANN_ROLE_NAME = "trainlaunch.io/role-name"
ANN_CODE = "trainlaunch.io/code"  # the code of record (schedulers/coderecord.py, JSON): describe
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# Set on each pod by the Job controller when the Job has backoffLimitPerIndex (1.29+): the
# index's failures before this pod, counted against the limit, and those the podFailurePolicy
# ignored (requeues: exit 75, preemption, eviction); absent means 0.
FAILURES_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
REQUEUES_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
RESERVED_PREFIX = "trainlaunch.io/"
# Set by the JobSet controller on its Jobs and pods: how often the JobSet restarted as a whole.
JOBSET_RESTARTS = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"  # JobSet's label on its Jobs, pods and Service
# Kueue: the LocalQueue an object is queued in (set by trainlaunch), and the label Kueue puts on
# the Workload it makes for an object (the object's uid).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WORKLOAD_OWNER_UID = "kueue.x-k8s.io/job-uid"
