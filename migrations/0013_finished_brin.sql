-- Pruning finds finished jobs by finished_at. A B-tree on it cost every
-- success one more index entry and 66 bytes of WAL, measured with the
-- bench's per-job budget (bench/budget-probe.ts: B-tree entries 4.99 -> 3.99
-- a job, WAL 1,081 -> 1,015 bytes). A job's finished version is written when
-- it ends, mostly at the end of the heap, so finished_at follows the heap's
-- order: what a BRIN index serves, as job_attempts_ended_brin does. Where
-- vacuum has freed room and old pages take new versions, a range only grows
-- wider: pruning reads more pages, and still finds exactly what it finds
-- now (a BRIN is checked against each row).
drop index leasehold.jobs_finished_idx;
create index jobs_finished_brin on leasehold.jobs using brin (finished_at)
  where status in ('succeeded', 'dead', 'cancelled');
