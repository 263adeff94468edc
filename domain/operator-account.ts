/**
 * The people who run the service, besides partners: operators and auditors, each with a role
 * (docs/operations.md, "Accounts and roles").
 */
import { z } from 'zod';

/**
 * `admin`: everything, accounts included. `operator`: partners and their keys, webhooks, projections,
 * the platform write API, redeliveries. `auditor`: reads only (cart histories, delivery logs and health,
 * projection status), never a secret and never a write.
 */
export const operatorRoles = ['admin', 'operator', 'auditor'] as const;
export const operatorRole = z.enum(operatorRoles);
export type OperatorRole = z.infer<typeof operatorRole>;
