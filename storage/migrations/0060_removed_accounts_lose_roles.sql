-- Accounts removed before role rows died with them (storage/users.py remove_user) kept their
-- roles, which an invitation to the same address brought back. End those roles now.
INSERT INTO user_roles (email, site, role, removed)
SELECT live.email, live.site, live.role, 1
FROM
  (SELECT email, site, argMax(role, changed_at) AS role FROM user_roles
   GROUP BY email, site HAVING argMax(removed, changed_at) = 0) AS live
INNER JOIN
  (SELECT email FROM users GROUP BY email HAVING argMax(removed, changed_at) = 1) AS removed_accounts
ON live.email = removed_accounts.email
