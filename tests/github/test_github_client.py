"""githubkit against the fake GitHub: App JWT → installation token, retries on 5xx and 429."""

from __future__ import annotations

import pytest
from githubkit.exception import RequestFailed

from app.config.process_settings import load_settings
from app.github.client import GitHubApp, GitHubNotConfigured


@pytest.fixture
def github(settings_env):
    return GitHubApp(load_settings(settings_env, dotenv=None))


def test_installation_client_posts_with_a_minted_token(github, fake_github):
    fake, _ = fake_github
    client = github.installation(1)
    resp = client.rest.issues.create_comment("octo", "repo", 5, data={"body": "hello"})
    assert resp.parsed_data.body == "hello"
    # A second call reuses the cached installation token: one exchange only.
    client.rest.issues.create_comment("octo", "repo", 5, data={"body": "again"})
    assert len(fake.calls("POST", r"/app/installations/1/access_tokens")) == 1
    assert [c["body"] for c in fake.issue_comments("octo/repo", 5)] == ["hello", "again"]


def test_repository_token_is_scoped_to_one_repository(github, fake_github):
    fake, _ = fake_github
    token = github.repository_token(1, "repo")
    assert token.token.startswith("ghs_")
    assert fake.tokens[token.token]["repositories"] == ["repo"]


def test_server_errors_are_retried(github, fake_github):
    fake, _ = fake_github
    client = github.installation(1)
    client.rest.issues.create_comment("octo", "repo", 1, data={"body": "warm"})
    fake.fail_next(r"/issues/1/comments$", 502)
    resp = client.rest.issues.create_comment("octo", "repo", 1, data={"body": "after 502"})
    assert resp.status_code == 201
    assert [c["body"] for c in fake.issue_comments("octo/repo", 1)] == ["warm", "after 502"]


def test_rate_limit_is_retried_after_retry_after(github, fake_github):
    fake, _ = fake_github
    client = github.installation(1)
    client.rest.issues.create_comment("octo", "repo", 2, data={"body": "warm"})
    fake.fail_next(r"/issues/2/comments$", 429, {"Retry-After": "1"})
    resp = client.rest.issues.create_comment("octo", "repo", 2, data={"body": "later"})
    assert resp.status_code == 201


def test_client_errors_are_not_retried(github, fake_github):
    fake, _ = fake_github
    client = github.installation(1)
    with pytest.raises(RequestFailed):
        client.rest.issues.get_comment("octo", "repo", 123456)
    assert len(fake.calls("GET", r"/issues/comments/123456")) == 1


def test_missing_credentials_are_a_clear_error(tmp_path):
    app = GitHubApp(load_settings({"THE_LOOP_STATE_DIR": str(tmp_path)}, dotenv=None))
    with pytest.raises(GitHubNotConfigured, match="GITHUB_APP_ID"):
        app.installation(1)
