//! The periodic dispatcher on paused time: a server whose clock follows tokio time launches the
//! children of a periodic job at the instants of its schedule in its time zone, across a
//! daylight-saving change, and a server restarted on the same store after a missed launch
//! catches up once.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use drover_server::{Clock, Server, ServerConfig};
use drover_state::StateStore;
use drover_structs::{Job, JobRegisterRequest, PeriodicConfig, TaskGroup};

/// A wall clock that starts at a fixed instant and moves with (paused) tokio time.
struct FollowingClock {
    base_unix_ns: i64,
    base: tokio::time::Instant,
}

impl Clock for FollowingClock {
    fn now_unix_ns(&self) -> i64 {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.base);
        self.base_unix_ns + i64::try_from(elapsed.as_nanos()).unwrap()
    }
}

fn start(state: StateStore, unix_s: i64) -> Server {
    let clock = FollowingClock {
        base_unix_ns: unix_s * 1_000_000_000,
        base: tokio::time::Instant::now(),
    };
    Server::start(ServerConfig::default(), state, Arc::new(clock))
}

fn periodic_job(id: &str, cron: &str, zone: &str) -> Job {
    Job {
        id: id.into(),
        r#type: "batch".into(),
        datacenters: vec!["dc1".into()],
        periodic: Some(PeriodicConfig {
            spec: cron.into(),
            spec_type: "cron".into(),
            time_zone: zone.into(),
            ..PeriodicConfig::default()
        }),
        task_groups: vec![TaskGroup {
            name: "g".into(),
            count: 1,
            ..TaskGroup::default()
        }],
        ..Job::default()
    }
}

fn launches(server: &Server, parent: &str) -> Vec<i64> {
    server
        .state()
        .jobs(Some("default"), &format!("{parent}/periodic-"))
        .iter()
        .filter(|child| child.parent_id == parent && child.periodic.is_none())
        .filter_map(|child| drover_structs::periodic_launch_time(&child.id))
        .collect()
}

/// Unix seconds of a UTC time.
fn utc(text: &str) -> i64 {
    let (date, time) = text.split_once('T').unwrap();
    let mut date = date.split('-').map(|part| part.parse::<i64>().unwrap());
    let (year, month, day) = (
        date.next().unwrap(),
        date.next().unwrap(),
        date.next().unwrap(),
    );
    let mut time = time
        .trim_end_matches('Z')
        .split(':')
        .map(|part| part.parse::<i64>().unwrap());
    let (hour, minute) = (time.next().unwrap(), time.next().unwrap());
    // Days from civil (Howard Hinnant's algorithm).
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + hour * 3_600 + minute * 60
}

#[tokio::test(start_paused = true)]
async fn launches_follow_the_zone_across_a_daylight_saving_change() {
    // New York springs forward at 02:00 EST on Sunday 8 March 2026: 02:30 does not exist that
    // day, so a job at 02:30 runs on the 7th and the 9th only.
    let state = StateStore::in_memory().await.unwrap();
    let server = start(state, utc("2026-03-07T00:00Z"));
    server
        .register_job(JobRegisterRequest {
            job: Some(periodic_job("nightly", "30 2 * * *", "America/New_York")),
            ..JobRegisterRequest::default()
        })
        .await
        .unwrap();
    assert!(launches(&server, "nightly").is_empty());
    tokio::time::sleep(Duration::from_secs(3 * 86_400)).await;
    let mut seen = launches(&server, "nightly");
    seen.sort_unstable();
    assert_eq!(
        seen,
        vec![
            utc("2026-03-07T07:30Z"), // 02:30 EST
            utc("2026-03-09T06:30Z"), // 02:30 EDT
        ]
    );
    // The last launch is recorded on the parent.
    let launch = server
        .state()
        .periodic_launch("default", "nightly")
        .unwrap();
    assert_eq!(
        launch.launch.unix_nanos(),
        Some(utc("2026-03-09T06:30Z") * 1_000_000_000)
    );
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_restarted_server_catches_up_a_missed_launch_once() {
    let state = StateStore::in_memory().await.unwrap();
    let server = start(state.clone(), utc("2026-06-01T00:00Z"));
    server
        .register_job(JobRegisterRequest {
            job: Some(periodic_job("hourly", "@hourly", "")),
            ..JobRegisterRequest::default()
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3_600 + 60)).await;
    assert_eq!(launches(&server, "hourly"), vec![utc("2026-06-01T01:00Z")]);
    server.shutdown().await;

    // No server from 01:01 to 04:20: the launches at 02:00, 03:00 and 04:00 are missed; the
    // restarted server launches once, now, then follows the schedule.
    let server = start(state, utc("2026-06-01T04:20Z"));
    tokio::time::sleep(Duration::from_secs(60)).await;
    let mut seen = launches(&server, "hourly");
    seen.sort_unstable();
    assert_eq!(
        seen,
        vec![utc("2026-06-01T01:00Z"), utc("2026-06-01T04:20Z")]
    );
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    let mut seen = launches(&server, "hourly");
    seen.sort_unstable();
    assert_eq!(
        seen,
        vec![
            utc("2026-06-01T01:00Z"),
            utc("2026-06-01T04:20Z"),
            utc("2026-06-01T05:00Z")
        ]
    );
    server.shutdown().await;
}
