//! The flush statements' text: one statement writes a whole batch
//! ([`flush_sql`]), and a leaner one writes a batch of submissions
//! ([`adds_sql`]); [`super::flush`] makes their parameters.

use super::flush::FenceKind;

/// The flush statement: deletes, then upserts from parallel arrays, for
/// jobs ($1; $2-$13), schedules ($14; $15-$24) and kept records ($25;
/// $26-$41), the high-water mark ($42), and the running marks (gone $43,
/// new $44); it returns one row. Fenced (a cluster's leader), every write
/// also needs the lease to still be at epoch $45, and no row is returned
/// if it has moved on: the lease row is key-share-locked (the epoch is a
/// key), so a takeover, which changes the epoch, waits for this statement,
/// while the leader's renewals (which do not) go on; and once a takeover
/// has committed, the statement writes nothing.
/// A partition's store is fenced the same way on its partition's row
/// (epoch $45, partition $46); it writes its partition into every row and
/// deletes or updates only rows of that partition. A set's store is fenced
/// on every partition of the set (partitions $46, epochs $45, arrays),
/// writes each row's own partition ($47 jobs, $48 schedules, $49 kept),
/// touches only rows of the set, and leaves the reservation alone.
/// Functions' settings come last, numbered on from the fence's parameters
/// (`f` below: from $45 unfenced, $50 for a set): names gone (f + 1), then
/// name, paused and the three limits (f + 2 to f + 6), and a set's
/// partitions (f + 7). A set may move a function's row between its own
/// partitions (a pin changed), never take one from outside the set.
/// Without `functions` (a batch that changes no settings, nearly every
/// one) the statement has neither functions' part nor their parameters:
/// every part costs the database work at each flush, even empty.
/// Deletes join the ids' array (an index probe per id) rather than test
/// `id = ANY(array)`, which a generic plan may check row by row.
pub(super) fn flush_sql(fence: FenceKind, functions: bool) -> String {
    let f = 44 + fence.params();
    let (fn_gone, fn_name, fn_paused) = (f + 1, f + 2, f + 3);
    let (fn_high, fn_normal, fn_low, fn_part) = (f + 4, f + 5, f + 6, f + 7);
    let (fence_cte, and_fence, where_fence, from_fence) = fence_sql(fence, 45, 46);
    let part = |table: &str, arr: &str| row_part(fence, 46, table, arr);
    let (jd_part, ju_col, ju_val, ju_arr, ju_only) = part("gearshift_jobs", "$47");
    let (sd_part, su_col, su_val, su_arr, su_only) = part("gearshift_schedules", "$48");
    let (kd_part, ku_col, ku_val, ku_arr, ku_only) = part("gearshift_kept", "$49");
    let (fd_part, fu_col, fu_val, fu_arr, mut fu_only) =
        part("gearshift_functions", &format!("${fn_part}"));
    // A set's function row may move to another partition of the set.
    let mut fu_partition = "";
    if fence == FenceKind::Set {
        fu_partition = ", partition = EXCLUDED.partition";
        fu_only = " WHERE gearshift_functions.partition = ANY($46::int[])".into();
    }
    let functions = match functions {
        false => String::new(),
        true => format!(
            "fd AS (DELETE FROM gearshift_functions t USING UNNEST(${fn_gone}::bytea[]) AS gone(function)
       WHERE t.function = gone.function{fd_part}{and_fence}),
fu AS (INSERT INTO gearshift_functions (function, paused, max_high, max_normal, max_low{fu_col})
       SELECT *{fu_val} FROM UNNEST(${fn_name}::bytea[], ${fn_paused}::boolean[],
         ${fn_high}::bigint[], ${fn_normal}::bigint[], ${fn_low}::bigint[]{fu_arr}){where_fence}
       ON CONFLICT (function) DO UPDATE SET paused = EXCLUDED.paused,
         max_high = EXCLUDED.max_high, max_normal = EXCLUDED.max_normal,
         max_low = EXCLUDED.max_low{fu_partition}{fu_only}),
"
        ),
    };
    let reserve = reserve_test(fence);
    let jobs = jobs_upsert(2, (&ju_col, &ju_val, &ju_arr, &ju_only), where_fence);
    format!(
        "WITH
{fence_cte}jd AS (DELETE FROM gearshift_jobs t USING UNNEST($1::bigint[]) AS gone(id)
       WHERE t.id = gone.id{jd_part}{and_fence}),
{jobs}sd AS (DELETE FROM gearshift_schedules t USING UNNEST($14::bigint[]) AS gone(id)
       WHERE t.id = gone.id{sd_part}{and_fence}),
su AS (INSERT INTO gearshift_schedules (id, handle, when_fields, monday_zero, function,
         unique_id, data, priority, next_ms, from_config{su_col})
       SELECT *{su_val} FROM UNNEST($15::bigint[], $16::bytea[], $17::bytea[], $18::boolean[],
         $19::bytea[], $20::bytea[], $21::bytea[], $22::smallint[], $23::bigint[],
         $24::boolean[]{su_arr}){where_fence}
       ON CONFLICT (id) DO UPDATE SET handle = EXCLUDED.handle,
         when_fields = EXCLUDED.when_fields, monday_zero = EXCLUDED.monday_zero,
         function = EXCLUDED.function, unique_id = EXCLUDED.unique_id, data = EXCLUDED.data,
         priority = EXCLUDED.priority, next_ms = EXCLUDED.next_ms,
         from_config = EXCLUDED.from_config{su_only}),
kd AS (DELETE FROM gearshift_kept t USING UNNEST($25::bigint[]) AS gone(id)
       WHERE t.id = gone.id{kd_part}{and_fence}),
ku AS (INSERT INTO gearshift_kept (id, handle, function, unique_id, priority, background,
         outcome, attempts, created_ms, started_ms, finished_ms, expires_ms, worker, error,
         result, history{ku_col})
       SELECT *{ku_val} FROM UNNEST($26::bigint[], $27::bytea[], $28::bytea[], $29::bytea[],
         $30::smallint[], $31::boolean[], $32::smallint[], $33::bigint[], $34::bigint[],
         $35::bigint[], $36::bigint[], $37::bigint[], $38::bytea[], $39::bytea[],
         $40::bytea[], $41::bytea[]{ku_arr}){where_fence}
       ON CONFLICT (id) DO UPDATE SET handle = EXCLUDED.handle, function = EXCLUDED.function,
         unique_id = EXCLUDED.unique_id, priority = EXCLUDED.priority,
         background = EXCLUDED.background, outcome = EXCLUDED.outcome,
         attempts = EXCLUDED.attempts, created_ms = EXCLUDED.created_ms,
         started_ms = EXCLUDED.started_ms, finished_ms = EXCLUDED.finished_ms,
         expires_ms = EXCLUDED.expires_ms, worker = EXCLUDED.worker, error = EXCLUDED.error,
         result = EXCLUDED.result, history = EXCLUDED.history{ku_only}),
{functions}rd AS (DELETE FROM gearshift_running t USING UNNEST($43::bigint[]) AS gone(id)
       WHERE t.id = gone.id{and_fence}),
ri AS (INSERT INTO gearshift_running (id) SELECT * FROM UNNEST($44::bigint[]){where_fence}
       ON CONFLICT (id) DO NOTHING),
ru AS (UPDATE gearshift_reservation SET last_reserved = $42::bigint
       WHERE last_reserved < $42::bigint{reserve}{and_fence})
SELECT 1{from_fence}
"
    )
}

/// What the reservation's update adds: a set's ids were reserved ahead,
/// so its mark is not moved.
fn reserve_test(fence: FenceKind) -> &'static str {
    match fence {
        FenceKind::Set => " AND FALSE",
        _ => "",
    }
}

/// The jobs' upsert from parallel arrays, numbered from `$first`, with a
/// table's partition parts ([`row_part`]: column, value, array, condition).
fn jobs_upsert(
    first: usize,
    (col, val, arr, only): (&str, &str, &str, &str),
    where_fence: &str,
) -> String {
    let n: Vec<String> = (first..first + 12).map(|i| format!("${i}")).collect();
    format!(
        "ju AS (INSERT INTO gearshift_jobs (id, handle, function, unique_id, priority, data, reducer,
         due_ms, attempts, created_ms, died_ms, error{col})
       SELECT *{val} FROM UNNEST({}::bigint[], {}::bytea[], {}::bytea[], {}::bytea[],
         {}::smallint[], {}::bytea[], {}::bytea[], {}::bigint[], {}::bigint[], {}::bigint[],
         {}::bigint[], {}::bytea[]{arr}){where_fence}
       ON CONFLICT (id) DO UPDATE SET handle = EXCLUDED.handle, function = EXCLUDED.function,
         unique_id = EXCLUDED.unique_id, priority = EXCLUDED.priority, data = EXCLUDED.data,
         reducer = EXCLUDED.reducer, due_ms = EXCLUDED.due_ms, attempts = EXCLUDED.attempts,
         created_ms = EXCLUDED.created_ms, died_ms = EXCLUDED.died_ms, error = EXCLUDED.error{only}),
",
        n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9], n[10], n[11]
    )
}

/// The fence's parts, its epoch (or epochs) in `$e` and its partition (or
/// partitions) in `$p`: the CTE that key-share-locks the lease rows, and
/// the tests a write, an `INSERT ... SELECT` and the final `SELECT` add.
fn fence_sql(
    fence: FenceKind,
    e: usize,
    p: usize,
) -> (String, &'static str, &'static str, &'static str) {
    let tests = (
        " AND EXISTS (SELECT 1 FROM fence)",
        " WHERE EXISTS (SELECT 1 FROM fence)",
        " FROM fence",
    );
    let cte = match fence {
        FenceKind::None => return (String::new(), "", "", ""),
        FenceKind::Leader => format!(
            "fence AS (SELECT epoch FROM gearshift_leader WHERE epoch = ${e}::bigint FOR KEY SHARE),\n"
        ),
        FenceKind::Partition => format!(
            "fence AS (SELECT epoch FROM gearshift_partitions\n       \
             WHERE partition = ${p}::int AND epoch = ${e}::bigint FOR KEY SHARE),\n"
        ),
        // Every partition of the set at its epoch, all locked.
        FenceKind::Set => format!(
            "fence AS (SELECT 1 FROM (SELECT p.partition FROM gearshift_partitions p\n       \
             JOIN UNNEST(${p}::int[], ${e}::bigint[]) AS o(partition, epoch)\n       \
             ON p.partition = o.partition AND p.epoch = o.epoch FOR KEY SHARE OF p) held\n       \
             HAVING count(*) = cardinality(${p}::int[])),\n"
        ),
    };
    (cte, tests.0, tests.1, tests.2)
}

/// A table's partition parts, the fence's partition (or partitions) in
/// `$p`: a partition's rows get its number and only its rows are touched;
/// a set's rows carry each its own (the array `arr`). The test a delete
/// adds, the column, the value or array an insert adds, and the upsert's
/// condition.
fn row_part(
    fence: FenceKind,
    p: usize,
    table: &str,
    arr: &str,
) -> (String, String, String, String, String) {
    match fence {
        FenceKind::Partition => (
            format!(" AND t.partition = ${p}::int"),
            ", partition".to_string(),
            format!(", ${p}::int"),
            String::new(),
            format!(" WHERE {table}.partition = EXCLUDED.partition"),
        ),
        FenceKind::Set => (
            format!(" AND t.partition = ANY(${p}::int[])"),
            ", partition".to_string(),
            String::new(),
            format!(", {arr}::int[]"),
            format!(" WHERE {table}.partition = EXCLUDED.partition"),
        ),
        _ => Default::default(),
    }
}

/// The statement for a batch that only adds or rewrites live jobs (a
/// stream of submissions, nearly every batch under a submit load): the
/// fence, the jobs' upsert and the high-water mark, and nothing else,
/// since every empty part of [`flush_sql`] still costs the database work.
/// Jobs' columns $1-$12 as there, the mark $13, then the fence's epoch
/// $14, its partition (or partitions) $15 and a set's rows' partitions $16.
pub(super) fn adds_sql(fence: FenceKind) -> String {
    let (fence_cte, and_fence, where_fence, from_fence) = fence_sql(fence, 14, 15);
    let (_, ju_col, ju_val, ju_arr, ju_only) = row_part(fence, 15, "gearshift_jobs", "$16");
    let reserve = reserve_test(fence);
    let jobs = jobs_upsert(1, (&ju_col, &ju_val, &ju_arr, &ju_only), where_fence);
    format!(
        "WITH
{fence_cte}{jobs}ru AS (UPDATE gearshift_reservation SET last_reserved = $13::bigint
       WHERE last_reserved < $13::bigint{reserve}{and_fence})
SELECT 1{from_fence}
"
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gearshift_core::placement::Placement;

    use super::super::flush::{Fence, Params, SetFence};
    use super::*;

    /// The highest `$n` a statement names.
    fn highest(sql: &str) -> usize {
        let mut most = 0;
        for (i, _) in sql.match_indices('$') {
            let digits: String = sql[i + 1..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            most = most.max(digits.parse().unwrap_or(0));
        }
        most
    }

    fn fences() -> [Fence; 4] {
        let set = SetFence {
            parts: vec![0, 1],
            epochs: vec![3, 4],
            placement: Placement::new(4),
            ids: 1..100,
        };
        [
            Fence::None,
            Fence::Leader(7),
            Fence::Partition {
                partition: 2,
                epoch: 7,
            },
            Fence::Set(Arc::new(set)),
        ]
    }

    #[test]
    fn each_statement_names_exactly_the_parameters_it_is_given() {
        let p = Params::default();
        for fence in fences() {
            let kind = fence.kind();
            assert_eq!(
                highest(&adds_sql(kind)),
                p.as_sql_adds(&fence).len(),
                "{kind:?}"
            );
            assert_eq!(
                highest(&flush_sql(kind, false)),
                p.as_sql(&fence).len(),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn the_lean_statement_writes_only_jobs_and_the_mark() {
        for fence in fences() {
            let sql = adds_sql(fence.kind());
            for table in [
                "gearshift_schedules",
                "gearshift_kept",
                "gearshift_running",
                "gearshift_functions",
            ] {
                assert!(!sql.contains(table), "{sql}");
            }
            assert!(!sql.contains("DELETE"), "{sql}");
            // Fenced, every write waits on the fence.
            if fence.kind() != FenceKind::None {
                assert_eq!(
                    sql.matches("EXISTS (SELECT 1 FROM fence)").count(),
                    2,
                    "{sql}"
                );
            }
        }
    }
}
