//! The key layout: the seed's `/v2/keys/jobs/<id>` is `<P>jobs/<id>`,
//! `/v2/keys/workers/<name>` is `<P>workers/<name>`; the split layout keeps
//! jobs under `<P>new/`, `<P>running/` and `<P>finished/` by state. Job ids
//! are decimal, zero-padded to 20 digits (v2's in-order keys), so the
//! lowest key is the oldest job.

use crate::doc::State;

/// Where job documents live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Every job under `<P>jobs/`.
    #[default]
    Single,
    /// `<P>new/`, `<P>running/`, `<P>finished/` by the last state.
    Split,
}

impl Layout {
    /// `single` or `split`.
    pub fn parse(word: &str) -> Option<Layout> {
        match word {
            "single" => Some(Layout::Single),
            "split" => Some(Layout::Split),
            _ => None,
        }
    }
}

/// The keys under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
    layout: Layout,
}

/// Width of a job id.
pub const ID_WIDTH: usize = 20;

impl Keys {
    /// Keys under `prefix` (a trailing `/` is added when missing).
    pub fn new(prefix: &str, layout: Layout) -> Keys {
        let mut prefix = prefix.to_owned();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Keys { prefix, layout }
    }

    /// The prefix, ending in `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The directory of jobs whose last state is `state`.
    pub fn job_dir(&self, state: State) -> String {
        let dir = match (self.layout, state) {
            (Layout::Single, _) => "jobs/",
            (Layout::Split, State::Queued) => "new/",
            (Layout::Split, State::Started) => "running/",
            (Layout::Split, State::Finished) => "finished/",
        };
        format!("{}{dir}", self.prefix)
    }

    /// The directory watched for jobs to claim.
    pub fn queue_dir(&self) -> String {
        self.job_dir(State::Queued)
    }

    /// The key of job `id` in state `state`.
    pub fn job(&self, id: &str, state: State) -> String {
        format!("{}{id}", self.job_dir(state))
    }

    /// The id in a key of the queue directory, if it is one.
    pub fn id_of<'k>(&self, key: &'k str) -> Option<&'k str> {
        let id = key.strip_prefix(&self.queue_dir())?;
        (!id.is_empty() && !id.contains('/')).then_some(id)
    }

    /// The directory of worker documents.
    pub fn workers_dir(&self) -> String {
        format!("{}workers/", self.prefix)
    }

    /// A worker's key.
    pub fn worker(&self, instance: &str) -> String {
        format!("{}workers/{instance}", self.prefix)
    }

    /// The counter native submitters allocate ids from.
    pub fn seq(&self) -> String {
        format!("{}seq/jobs", self.prefix)
    }
}

/// A job id as a worker's `Job` field names it (a number, or a string of
/// digits, padded to [`ID_WIDTH`]; any other string as it is); `None` for
/// an idle worker (absent, null, empty).
pub fn job_ref(value: Option<&serde_json::Value>) -> Option<String> {
    let text = match value? {
        serde_json::Value::Number(n) => n.as_u64()?.to_string(),
        serde_json::Value::String(s) if !s.is_empty() => s.clone(),
        _ => return None,
    };
    if text.bytes().all(|b| b.is_ascii_digit()) && text.len() < ID_WIDTH {
        Some(format!("{text:0>ID_WIDTH$}"))
    } else {
        Some(text)
    }
}

/// The end of the range of every key starting with `prefix`.
pub fn range_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn single_layout_keeps_every_job_under_jobs() {
        let k = Keys::new("/q", Layout::Single);
        assert_eq!(k.prefix(), "/q/");
        assert_eq!(
            k.job("00000000000000000007", State::Finished),
            "/q/jobs/00000000000000000007"
        );
        assert_eq!(k.queue_dir(), "/q/jobs/");
        assert_eq!(k.worker("gearshift-n-3"), "/q/workers/gearshift-n-3");
        assert_eq!(k.seq(), "/q/seq/jobs");
        assert_eq!(k.id_of("/q/jobs/42"), Some("42"));
        assert_eq!(k.id_of("/q/jobs/"), None);
        assert_eq!(k.id_of("/q/jobs/a/b"), None);
        assert_eq!(k.id_of("/q/workers/x"), None);
    }

    #[test]
    fn split_layout_moves_by_state() {
        let k = Keys::new("/", Layout::Split);
        assert_eq!(k.job("1", State::Queued), "/new/1");
        assert_eq!(k.job("1", State::Started), "/running/1");
        assert_eq!(k.job("1", State::Finished), "/finished/1");
        assert_eq!(k.id_of("/new/1"), Some("1"));
        assert_eq!(k.id_of("/running/1"), None);
        assert_eq!(Layout::parse("split"), Some(Layout::Split));
        assert_eq!(Layout::parse("three"), None);
    }

    #[test]
    fn job_fields_name_padded_ids() {
        assert_eq!(
            job_ref(Some(&json!(14))).as_deref(),
            Some("00000000000000000014")
        );
        assert_eq!(
            job_ref(Some(&json!("14"))).as_deref(),
            Some("00000000000000000014")
        );
        assert_eq!(job_ref(Some(&json!("abc"))).as_deref(), Some("abc"));
        assert_eq!(job_ref(Some(&json!(""))), None);
        assert_eq!(job_ref(Some(&json!(null))), None);
        assert_eq!(job_ref(None), None);
    }

    #[test]
    fn range_end_covers_the_prefix() {
        assert_eq!(range_end("/jobs/"), b"/jobs0".to_vec());
        assert_eq!(range_end("a\u{7f}"), vec![b'a', 0x80]);
    }
}
