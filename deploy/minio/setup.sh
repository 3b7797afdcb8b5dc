#!/bin/sh
# Run once per `docker compose up` by the minio-setup service (deploy/compose.yaml), as MinIO's root
# user: the three buckets, and one user per role holding the policy of the same name in this folder.
# Safe to run again: buckets are kept, policies and secrets are updated in place.
set -eu
mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null
mc mb --ignore-existing local/predictions local/labels local/outcomes

role() {  # policy, access key, secret key
  mc admin policy create local "$1" "/setup/$1.json"
  mc admin user add local "$2" "$3"
  # attach refuses a policy already attached (every `up` after the first); that is the state we want.
  mc admin policy attach local "$1" --user "$2" 2>/dev/null || mc admin user info local "$2" | grep -q "$1"
}

role leaderboard-site "$S3_ACCESS_KEY_ID" "$S3_SECRET_ACCESS_KEY"
role leaderboard-labels-writer "$LABELS_S3_ACCESS_KEY_ID" "$LABELS_S3_SECRET_ACCESS_KEY"
role leaderboard-worker "$EVAL_S3_ACCESS_KEY_ID" "$EVAL_S3_SECRET_ACCESS_KEY"
