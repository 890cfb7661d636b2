//! The seed's JSON documents, read and rewritten in place: a job's
//! `States` [{`State`,`Step`,`Date`}], `Owner` and `Result` {`Status`,
//! `Info`}; a worker's `Name`, `InstanceId`, `PrivateIp`, `PublicIp`,
//! `Job`, `Heartbeat`, `Stats`, `Status`. Every other field is kept as it
//! is, in its place, when a document is rewritten.

use serde_json::{Map, Value};

/// A job's state (the last element of `States`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Waiting for a worker.
    Queued,
    /// A worker has it.
    Started,
    /// Done (see `Result`).
    Finished,
}

impl State {
    /// The seed's word.
    pub fn word(self) -> &'static str {
        match self {
            State::Queued => "QUEUED",
            State::Started => "STARTED",
            State::Finished => "FINISHED",
        }
    }

    fn parse(word: &str) -> Option<State> {
        match word {
            "QUEUED" => Some(State::Queued),
            "STARTED" => Some(State::Started),
            "FINISHED" => Some(State::Finished),
            _ => None,
        }
    }
}

/// Why a document is not one the bridge can use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DocError {
    /// Not JSON, or not a JSON object.
    #[error("not a JSON object: {0}")]
    Malformed(String),
    /// No `States` list, an empty one, or a state without a `State` word.
    #[error("no usable `States` list")]
    NoStates,
    /// A `State` word the seed does not have.
    #[error("unknown state {0:?}")]
    UnknownState(String),
}

/// A job document.
#[derive(Debug, Clone, PartialEq)]
pub struct JobDoc {
    fields: Map<String, Value>,
}

fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, DocError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(DocError::Malformed(format!("a JSON {}", kind(&other)))),
        Err(e) => Err(DocError::Malformed(e.to_string())),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn state_entry(state: State, step: &str, date: &str) -> Value {
    let mut m = Map::new();
    m.insert("State".into(), Value::String(state.word().into()));
    m.insert("Step".into(), Value::String(step.into()));
    m.insert("Date".into(), Value::String(date.into()));
    Value::Object(m)
}

impl JobDoc {
    /// Parses a job; its last state must be one of the seed's.
    pub fn parse(bytes: &[u8]) -> Result<JobDoc, DocError> {
        let doc = JobDoc {
            fields: parse_object(bytes)?,
        };
        doc.state()?;
        Ok(doc)
    }

    /// The last state.
    pub fn state(&self) -> Result<State, DocError> {
        let last = self
            .fields
            .get("States")
            .and_then(Value::as_array)
            .and_then(|s| s.last())
            .and_then(|s| s.get("State"))
            .and_then(Value::as_str)
            .ok_or(DocError::NoStates)?;
        State::parse(last).ok_or_else(|| DocError::UnknownState(last.to_owned()))
    }

    /// The Gearman function: the string at `field` (a dotted path into
    /// nested objects, `Function` by default), else `default`.
    pub fn function(&self, field: &str, default: &str) -> String {
        let mut parts = field.split('.');
        let first = parts.next().unwrap_or_default();
        let mut at = self.fields.get(first);
        for p in parts {
            at = at.and_then(|v| v.get(p));
        }
        match at.and_then(Value::as_str) {
            Some(f) if !f.is_empty() => f.to_owned(),
            _ => default.to_owned(),
        }
    }

    /// `Owner`, when set.
    pub fn owner(&self) -> Option<&str> {
        self.fields
            .get("Owner")
            .and_then(Value::as_str)
            .filter(|o| !o.is_empty())
    }

    fn states(&mut self) -> &mut Vec<Value> {
        let states = self
            .fields
            .entry("States")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !states.is_array() {
            *states = Value::Array(Vec::new());
        }
        match states {
            Value::Array(a) => a,
            _ => unreachable!("made an array above"),
        }
    }

    fn push(&mut self, state: State, step: &str, date: &str) {
        self.states().push(state_entry(state, step, date));
    }

    /// The claim: `Owner` set and a `STARTED` state appended.
    pub fn claim(&mut self, owner: &str, date: &str) {
        self.set_owner(owner);
        self.push(State::Started, "", date);
    }

    /// Sets `Owner`.
    pub fn set_owner(&mut self, owner: &str) {
        self.fields
            .insert("Owner".into(), Value::String(owner.into()));
    }

    /// Sets the last state's `Step`.
    pub fn set_step(&mut self, step: &str) {
        if let Some(Value::Object(last)) = self.states().last_mut() {
            last.insert("Step".into(), Value::String(step.into()));
        }
    }

    /// The last state's `Step`, if it has one.
    pub fn step(&self) -> Option<&str> {
        self.fields
            .get("States")?
            .as_array()?
            .last()?
            .get("Step")?
            .as_str()
    }

    /// Appends `FINISHED` and sets `Result`.
    pub fn finish(&mut self, success: bool, info: &str, date: &str) {
        self.push(State::Finished, "", date);
        let mut result = Map::new();
        let status = if success { "SUCCESS" } else { "FAILURE" };
        result.insert("Status".into(), Value::String(status.into()));
        result.insert("Info".into(), Value::String(info.into()));
        self.fields.insert("Result".into(), Value::Object(result));
    }

    /// Appends `QUEUED` saying why, and clears `Owner`.
    pub fn requeue(&mut self, step: &str, date: &str) {
        self.push(State::Queued, step, date);
        if self.fields.contains_key("Owner") {
            self.fields
                .insert("Owner".into(), Value::String(String::new()));
        }
    }

    /// Appends `QUEUED` for a retry its owner will run (`Owner` stays).
    pub fn push_retry(&mut self, step: &str, date: &str) {
        self.push(State::Queued, step, date);
    }

    /// The document as JSON.
    pub fn to_vec(&self) -> Vec<u8> {
        serde_json::to_vec(&self.fields).unwrap_or_default()
    }
}

/// `ALIVE` or `DEAD`.
pub const ALIVE: &str = "ALIVE";
/// See [`ALIVE`].
pub const DEAD: &str = "DEAD";

/// A worker document.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerDoc {
    fields: Map<String, Value>,
}

impl WorkerDoc {
    /// A new entry for one of Gearshift's workers.
    pub fn new(name: &str, instance: &str, private_ip: &str, heartbeat: &str) -> WorkerDoc {
        let mut m = Map::new();
        m.insert("Name".into(), Value::String(name.into()));
        m.insert("InstanceId".into(), Value::String(instance.into()));
        m.insert("PrivateIp".into(), Value::String(private_ip.into()));
        m.insert("PublicIp".into(), Value::String(String::new()));
        m.insert("Job".into(), Value::String(String::new()));
        m.insert("Heartbeat".into(), Value::String(heartbeat.into()));
        m.insert("Status".into(), Value::String(ALIVE.into()));
        WorkerDoc { fields: m }
    }

    /// The entry of a Gearshift bridge itself (`Role` says so).
    pub fn bridge(instance: &str, private_ip: &str, heartbeat: &str) -> WorkerDoc {
        let mut w = WorkerDoc::new(instance, instance, private_ip, heartbeat);
        w.fields.insert(
            "Role".into(),
            Value::String(crate::registry::BRIDGE_ROLE.into()),
        );
        w
    }

    /// Whether it is a Gearshift bridge's own entry.
    pub fn is_bridge(&self) -> bool {
        self.text("Role") == Some(crate::registry::BRIDGE_ROLE)
    }

    /// Parses any worker's entry.
    pub fn parse(bytes: &[u8]) -> Result<WorkerDoc, DocError> {
        Ok(WorkerDoc {
            fields: parse_object(bytes)?,
        })
    }

    fn text(&self, field: &str) -> Option<&str> {
        self.fields.get(field).and_then(Value::as_str)
    }

    /// `Status` is `ALIVE`.
    pub fn alive(&self) -> bool {
        self.text("Status") == Some(ALIVE)
    }

    /// `Name`, else `InstanceId`, else empty.
    pub fn name(&self) -> &str {
        self.text("Name")
            .filter(|n| !n.is_empty())
            .or_else(|| self.text("InstanceId"))
            .unwrap_or("")
    }

    /// `InstanceId`, if set.
    pub fn instance(&self) -> Option<&str> {
        self.text("InstanceId").filter(|i| !i.is_empty())
    }

    /// The job it runs, as a padded id.
    pub fn job(&self) -> Option<String> {
        crate::keys::job_ref(self.fields.get("Job"))
    }

    /// The last heartbeat in Unix ms: RFC 3339, or a number of seconds
    /// (milliseconds when it is that large).
    pub fn heartbeat_ms(&self) -> Option<i64> {
        match self.fields.get("Heartbeat")? {
            Value::String(s) => crate::time::parse_ms(s),
            Value::Number(n) => {
                let v = n.as_f64()?;
                Some(if v > 1e12 {
                    v as i64
                } else {
                    (v * 1000.0) as i64
                })
            }
            _ => None,
        }
    }

    /// Whether a harvester takes it: `ALIVE` and no heartbeat within
    /// `timeout_ms` of `now_ms` (one that cannot be read counts as none).
    pub fn stale(&self, now_ms: i64, timeout_ms: i64) -> bool {
        self.alive()
            && self
                .heartbeat_ms()
                .is_none_or(|hb| now_ms.saturating_sub(hb) > timeout_ms)
    }

    /// Sets `Heartbeat`.
    pub fn set_heartbeat(&mut self, date: &str) {
        self.fields
            .insert("Heartbeat".into(), Value::String(date.into()));
    }

    /// Sets `Job` (empty for none).
    pub fn set_job(&mut self, job: Option<&str>) {
        self.fields
            .insert("Job".into(), Value::String(job.unwrap_or("").into()));
    }

    /// Sets `Name`; true if it changed.
    pub fn set_name(&mut self, name: &str) -> bool {
        if self.text("Name") == Some(name) {
            return false;
        }
        self.fields
            .insert("Name".into(), Value::String(name.into()));
        true
    }

    /// Sets `Stats` from what the worker reported: `Cpu` its commands'
    /// CPU seconds so far, `Mem` the largest resident set in MiB; true if
    /// it changed.
    pub fn set_stats(&mut self, cpu_ms: u64, max_rss_kib: u64) -> bool {
        let round = |v: f64, to: f64| (v * to).round() / to;
        let stats = serde_json::json!({
            "Cpu": round(cpu_ms as f64 / 1000.0, 1000.0),
            "Mem": round(max_rss_kib as f64 / 1024.0, 10.0),
        });
        if self.fields.get("Stats") == Some(&stats) {
            return false;
        }
        self.fields.insert("Stats".into(), stats);
        true
    }

    /// Sets `Status` to `DEAD`.
    pub fn mark_dead(&mut self) {
        self.fields
            .insert("Status".into(), Value::String(DEAD.into()));
    }

    /// The document as JSON.
    pub fn to_vec(&self) -> Vec<u8> {
        serde_json::to_vec(&self.fields).unwrap_or_default()
    }
}

/// Whether `a` names `b` or the Gearshift `b` is a connection of
/// (`gearshift-<node>` and `gearshift-<node>-<conn>`).
pub fn same_gearshift(a: &str, b: &str) -> bool {
    b.strip_prefix(a)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// What a harvester does to a lost worker's job: requeue it if it is
/// still `STARTED` and owned by that worker (or by no one, or by the
/// Gearshift whose connection the worker was); `None` to leave it.
pub fn harvested_job(job: &JobDoc, worker: &WorkerDoc, date: &str) -> Option<JobDoc> {
    if job.state().ok()? != State::Started {
        return None;
    }
    let ours = match job.owner() {
        None => true,
        Some(owner) => {
            worker.name() == owner
                || worker
                    .instance()
                    .is_some_and(|i| same_gearshift(owner, i) || same_gearshift(i, owner))
        }
    };
    if !ours {
        return None;
    }
    let mut out = job.clone();
    out.requeue(&format!("harvested: worker {} lost", worker.name()), date);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = r#"{"Container":{"Config":""},"Function":"resize","Fileset":{"Input":{"Name":"foo"}},"States":[{"State":"QUEUED","Step":"","Date":"2026-11-28T10:00:00Z"}],"Extra":[1,2]}"#;

    #[test]
    fn a_claim_appends_started_and_keeps_unknown_fields() {
        let mut j = JobDoc::parse(JOB.as_bytes()).expect("valid");
        assert_eq!(j.state(), Ok(State::Queued));
        assert_eq!(j.function("Function", "etcd-job"), "resize");
        assert_eq!(j.function("Container.Config", "etcd-job"), "etcd-job");
        assert_eq!(j.function("Fileset.Input.Name", "x"), "foo");
        j.claim("gearshift-n", "2026-11-28T10:00:01.000Z");
        assert_eq!(j.state(), Ok(State::Started));
        assert_eq!(j.owner(), Some("gearshift-n"));
        j.set_step("1/2");
        assert_eq!(j.step(), Some("1/2"));
        let text = String::from_utf8(j.to_vec()).expect("utf-8");
        assert!(
            text.starts_with(r#"{"Container":{"Config":""},"Function":"resize","Fileset""#),
            "{text}"
        );
        assert!(text.contains(r#""Extra":[1,2]"#));
        assert!(
            text.contains(r#"{"State":"STARTED","Step":"1/2","Date":"2026-11-28T10:00:01.000Z"}"#)
        );
    }

    #[test]
    fn finishing_sets_the_result() {
        let mut j = JobDoc::parse(JOB.as_bytes()).expect("valid");
        j.claim("o", "d1");
        j.finish(false, "disk full", "d2");
        assert_eq!(j.state(), Ok(State::Finished));
        let v: Value = serde_json::from_slice(&j.to_vec()).expect("json");
        assert_eq!(v["Result"]["Status"], "FAILURE");
        assert_eq!(v["Result"]["Info"], "disk full");
        assert_eq!(v["States"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn bad_documents_say_why() {
        assert!(matches!(
            JobDoc::parse(b"{not json"),
            Err(DocError::Malformed(_))
        ));
        assert!(matches!(JobDoc::parse(b"[1]"), Err(DocError::Malformed(_))));
        assert_eq!(JobDoc::parse(b"{}"), Err(DocError::NoStates));
        assert_eq!(JobDoc::parse(br#"{"States":[]}"#), Err(DocError::NoStates));
        assert_eq!(
            JobDoc::parse(br#"{"States":[{"State":"PAUSED"}]}"#),
            Err(DocError::UnknownState("PAUSED".into()))
        );
    }

    #[test]
    fn stale_workers_and_their_jobs_are_harvested() {
        let mut w = WorkerDoc::new("w1", "gearshift-n-3", "127.0.0.1", "2026-11-28T10:00:00Z");
        let t0 = crate::time::parse_ms("2026-11-28T10:00:00Z").expect("ts");
        assert!(!w.stale(t0 + 60_000, 60_000));
        assert!(w.stale(t0 + 60_001, 60_000));
        let mut j = JobDoc::parse(JOB.as_bytes()).expect("valid");
        assert_eq!(harvested_job(&j, &w, "d"), None, "a queued job stays");
        j.claim("gearshift-n", "d");
        let back = harvested_job(&j, &w, "d9").expect("requeued");
        assert_eq!(back.state(), Ok(State::Queued));
        assert_eq!(back.owner(), None);
        assert_eq!(back.step(), Some("harvested: worker w1 lost"));
        let mut other = j.clone();
        other.claim("native-7", "d");
        assert_eq!(
            harvested_job(&other, &w, "d"),
            None,
            "someone else's job stays"
        );
        j.finish(true, "ok", "d");
        assert_eq!(harvested_job(&j, &w, "d"), None, "a finished job stays");
        w.mark_dead();
        assert!(!w.stale(i64::MAX, 1));
        let native = WorkerDoc::parse(
            br#"{"Name":"n","Heartbeat":1795860000,"Status":"ALIVE","Job":14,"Stats":{"Cpu":1}}"#,
        )
        .expect("json");
        assert_eq!(native.heartbeat_ms(), Some(1_795_860_000_000));
        assert_eq!(native.job().as_deref(), Some("00000000000000000014"));
        let garbled = WorkerDoc::parse(br#"{"Status":"ALIVE","Heartbeat":"soon"}"#).expect("json");
        assert!(garbled.stale(0, 1_000_000));
        let mut w = WorkerDoc::new("a", "i", "127.0.0.1", "2026-11-28T10:00:00Z");
        assert!(w.set_stats(1_250, 3_072));
        assert!(!w.set_stats(1_250, 3_072), "unchanged");
        let v: Value = serde_json::from_slice(&w.to_vec()).expect("json");
        assert_eq!(v["Stats"], serde_json::json!({"Cpu": 1.25, "Mem": 3.0}));
        assert!(w.set_name("b") && !w.set_name("b"));
    }
}
