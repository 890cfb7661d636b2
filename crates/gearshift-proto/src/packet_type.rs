//! The numbered packet types of the Gearman binary protocol (1-42) and what
//! the wire layout of each one's body is: how many NUL-terminated arguments
//! come first, and whether the rest is an opaque data part.

/// Every packet type a gearmand 1.1 server knows, by its wire number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum PacketType {
    /// Worker registers a function.
    CanDo = 1,
    /// Worker unregisters a function.
    CantDo = 2,
    /// Worker unregisters every function.
    ResetAbilities = 3,
    /// Worker is about to sleep; wake it with NOOP.
    PreSleep = 4,
    /// Number 5 has never been assigned.
    Unused = 5,
    /// Server wakes a sleeping worker.
    Noop = 6,
    /// Foreground job, normal priority.
    SubmitJob = 7,
    /// Server acknowledges a submission with the job handle.
    JobCreated = 8,
    /// Worker asks for a job.
    GrabJob = 9,
    /// Server has no job for the worker.
    NoJob = 10,
    /// Server hands a job to a worker.
    JobAssign = 11,
    /// Progress of a job (numerator, denominator).
    WorkStatus = 12,
    /// Job finished successfully.
    WorkComplete = 13,
    /// Job failed.
    WorkFail = 14,
    /// Client asks for a job's status by handle.
    GetStatus = 15,
    /// Echo request.
    EchoReq = 16,
    /// Echo response.
    EchoRes = 17,
    /// Background job, normal priority.
    SubmitJobBg = 18,
    /// Server reports an error.
    Error = 19,
    /// Answer to GET_STATUS.
    StatusRes = 20,
    /// Foreground job, high priority.
    SubmitJobHigh = 21,
    /// Connection names itself for the `workers` listing.
    SetClientId = 22,
    /// CAN_DO with a per-job time limit in milliseconds.
    CanDoTimeout = 23,
    /// Never implemented by any server.
    AllYours = 24,
    /// Job failed with an exception payload.
    WorkException = 25,
    /// Connection option request.
    OptionReq = 26,
    /// Connection option accepted.
    OptionRes = 27,
    /// Partial result data of a job.
    WorkData = 28,
    /// Warning data of a job.
    WorkWarning = 29,
    /// GRAB_JOB answered with JOB_ASSIGN_UNIQ.
    GrabJobUniq = 30,
    /// JOB_ASSIGN with the unique id.
    JobAssignUniq = 31,
    /// Background job, high priority.
    SubmitJobHighBg = 32,
    /// Foreground job, low priority.
    SubmitJobLow = 33,
    /// Background job, low priority.
    SubmitJobLowBg = 34,
    /// Cron-style scheduled job (not supported by gearmand 1.1).
    SubmitJobSched = 35,
    /// Background job to run at a Unix time.
    SubmitJobEpoch = 36,
    /// Foreground map/reduce job.
    SubmitReduceJob = 37,
    /// Background map/reduce job.
    SubmitReduceJobBackground = 38,
    /// GRAB_JOB answered with JOB_ASSIGN_ALL when the job has a reducer.
    GrabJobAll = 39,
    /// JOB_ASSIGN with unique id and reducer.
    JobAssignAll = 40,
    /// Client asks for a job's status by unique id.
    GetStatusUnique = 41,
    /// Answer to GET_STATUS_UNIQUE.
    StatusResUnique = 42,
}

/// The highest packet type number that exists.
pub const MAX_PACKET_TYPE: u32 = 42;

impl PacketType {
    /// Maps a wire number to a type; `None` for 0 and anything above 42.
    pub fn from_u32(n: u32) -> Option<Self> {
        use PacketType::*;
        Some(match n {
            1 => CanDo,
            2 => CantDo,
            3 => ResetAbilities,
            4 => PreSleep,
            5 => Unused,
            6 => Noop,
            7 => SubmitJob,
            8 => JobCreated,
            9 => GrabJob,
            10 => NoJob,
            11 => JobAssign,
            12 => WorkStatus,
            13 => WorkComplete,
            14 => WorkFail,
            15 => GetStatus,
            16 => EchoReq,
            17 => EchoRes,
            18 => SubmitJobBg,
            19 => Error,
            20 => StatusRes,
            21 => SubmitJobHigh,
            22 => SetClientId,
            23 => CanDoTimeout,
            24 => AllYours,
            25 => WorkException,
            26 => OptionReq,
            27 => OptionRes,
            28 => WorkData,
            29 => WorkWarning,
            30 => GrabJobUniq,
            31 => JobAssignUniq,
            32 => SubmitJobHighBg,
            33 => SubmitJobLow,
            34 => SubmitJobLowBg,
            35 => SubmitJobSched,
            36 => SubmitJobEpoch,
            37 => SubmitReduceJob,
            38 => SubmitReduceJobBackground,
            39 => GrabJobAll,
            40 => JobAssignAll,
            41 => GetStatusUnique,
            42 => StatusResUnique,
            _ => return None,
        })
    }

    /// The wire number.
    pub fn as_u32(self) -> u32 {
        self as u32
    }

    /// The body layout: `(nul_terminated_args, has_data)`.
    ///
    /// When `has_data` is false the last of the arguments is the raw rest of
    /// the body, without a terminating NUL (gearmand's `command.cc`); the
    /// count then includes that last argument.
    pub fn layout(self) -> (usize, bool) {
        use PacketType::*;
        match self {
            ResetAbilities | PreSleep | Unused | Noop | GrabJob | NoJob | AllYours
            | GrabJobUniq | GrabJobAll => (0, false),
            CanDo | CantDo | GetStatus | SetClientId | OptionReq | OptionRes | WorkFail
            | GetStatusUnique | JobCreated => (1, false),
            EchoReq | EchoRes => (0, true),
            WorkComplete | WorkData | WorkWarning | WorkException | Error | CanDoTimeout => {
                (1, true)
            }
            SubmitJob | SubmitJobBg | SubmitJobHigh | SubmitJobHighBg | SubmitJobLow
            | SubmitJobLowBg | JobAssign | WorkStatus => (2, true),
            SubmitJobEpoch | JobAssignUniq => (3, true),
            SubmitReduceJob | SubmitReduceJobBackground | StatusRes => (4, true),
            JobAssignAll => (4, true),
            StatusResUnique => (5, true),
            SubmitJobSched => (7, true),
        }
    }

    /// The protocol name, as gearmand's logs and the protocol reference spell it.
    pub fn name(self) -> &'static str {
        use PacketType::*;
        match self {
            CanDo => "CAN_DO",
            CantDo => "CANT_DO",
            ResetAbilities => "RESET_ABILITIES",
            PreSleep => "PRE_SLEEP",
            Unused => "UNUSED",
            Noop => "NOOP",
            SubmitJob => "SUBMIT_JOB",
            JobCreated => "JOB_CREATED",
            GrabJob => "GRAB_JOB",
            NoJob => "NO_JOB",
            JobAssign => "JOB_ASSIGN",
            WorkStatus => "WORK_STATUS",
            WorkComplete => "WORK_COMPLETE",
            WorkFail => "WORK_FAIL",
            GetStatus => "GET_STATUS",
            EchoReq => "ECHO_REQ",
            EchoRes => "ECHO_RES",
            SubmitJobBg => "SUBMIT_JOB_BG",
            Error => "ERROR",
            StatusRes => "STATUS_RES",
            SubmitJobHigh => "SUBMIT_JOB_HIGH",
            SetClientId => "SET_CLIENT_ID",
            CanDoTimeout => "CAN_DO_TIMEOUT",
            AllYours => "ALL_YOURS",
            WorkException => "WORK_EXCEPTION",
            OptionReq => "OPTION_REQ",
            OptionRes => "OPTION_RES",
            WorkData => "WORK_DATA",
            WorkWarning => "WORK_WARNING",
            GrabJobUniq => "GRAB_JOB_UNIQ",
            JobAssignUniq => "JOB_ASSIGN_UNIQ",
            SubmitJobHighBg => "SUBMIT_JOB_HIGH_BG",
            SubmitJobLow => "SUBMIT_JOB_LOW",
            SubmitJobLowBg => "SUBMIT_JOB_LOW_BG",
            SubmitJobSched => "SUBMIT_JOB_SCHED",
            SubmitJobEpoch => "SUBMIT_JOB_EPOCH",
            SubmitReduceJob => "SUBMIT_REDUCE_JOB",
            SubmitReduceJobBackground => "SUBMIT_REDUCE_JOB_BACKGROUND",
            GrabJobAll => "GRAB_JOB_ALL",
            JobAssignAll => "JOB_ASSIGN_ALL",
            GetStatusUnique => "GET_STATUS_UNIQUE",
            StatusResUnique => "STATUS_RES_UNIQUE",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_round_trips() {
        assert_eq!(PacketType::from_u32(0), None);
        assert_eq!(PacketType::from_u32(43), None);
        for n in 1..=MAX_PACKET_TYPE {
            let t = PacketType::from_u32(n).expect("1..=42 all exist");
            assert_eq!(t.as_u32(), n);
        }
    }
}
