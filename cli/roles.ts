/** The roles a process can run (`pds serve --role`), apart from the composition root so that the command line can name them without loading it. */
export const ROLES = ['all', 'api', 'projector', 'dispatcher'] as const;
export type Role = (typeof ROLES)[number];
/** The roles a component can belong to; a process of role `all` runs every component. */
export type ComponentRole = Exclude<Role, 'all'>;
